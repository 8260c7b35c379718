#include "kernels/low_rank.h"

#include <immintrin.h>

#include <cmath>

namespace cohort {
namespace {

// Lanes [0, n) of a row's last, partial group of eight (n in 1..7).
__m256i FirstLanes(int64_t n) {
  static const int32_t kBits[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                    0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kBits + 8 - n));
}

__m256 Load(const float* p, int64_t left) {
  return left >= 8 ? _mm256_loadu_ps(p)
                   : _mm256_maskload_ps(p, FirstLanes(left));
}

void Store(float* p, int64_t left, __m256 v) {
  if (left >= 8) {
    _mm256_storeu_ps(p, v);
  } else {
    _mm256_maskstore_ps(p, FirstLanes(left), v);
  }
}

float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

double HorizontalSum(__m256d v) {
  __m128d s =
      _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// sum a[i] * b[i] in double, eight floats at a time in two accumulators.
double DotDouble(const float* a, const float* b, int64_t n) {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(a + i), y = _mm256_loadu_ps(b + i);
    lo = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)),
                         _mm256_cvtps_pd(_mm256_castps256_ps128(y)), lo);
    hi = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)),
                         _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1)), hi);
  }
  double sum = HorizontalSum(_mm256_add_pd(lo, hi));
  for (; i < n; ++i) sum += double{a[i]} * b[i];
  return sum;
}

// y += a * x.
void Axpy(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  for (int64_t i = 0; i < n; i += 8) {
    Store(y + i, n - i,
          _mm256_fmadd_ps(va, Load(x + i, n - i), Load(y + i, n - i)));
  }
}

// out[k] = sum_i x[i] * ys[k][i] for K rows of ys, `stride` apart.
template <int K>
void Dots(const float* x, const float* ys, int64_t stride, int64_t n,
          float* out, int64_t out_stride) {
  __m256 acc[K];
  for (int k = 0; k < K; ++k) acc[k] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 v = Load(x + i, n - i);
    for (int k = 0; k < K; ++k) {
      acc[k] = _mm256_fmadd_ps(v, Load(ys + k * stride + i, n - i), acc[k]);
    }
  }
  for (int k = 0; k < K; ++k) out[k * out_stride] = HorizontalSum(acc[k]);
}

}  // namespace

void OrthogonalizeRows(float* m, int count, int64_t length, float epsilon) {
  for (int i = 0; i < count; ++i) {
    float* row = m + i * length;
    const float norm =
        static_cast<float>(std::sqrt(DotDouble(row, row, length))) + epsilon;
    const float inv = norm > 0 ? 1.0f / norm : 0.0f;
    for (int64_t c = 0; c < length; ++c) row[c] *= inv;
    for (int j = i + 1; j < count; ++j) {
      float* later = m + j * length;
      const double dot = DotDouble(row, later, length);
      Axpy(-static_cast<float>(dot), row, later, length);
    }
  }
}

void LowRankProject(const float* m, int64_t rows, int64_t cols, const float* qt,
                    int rank, float* pt) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = m + r * cols;
    int k = 0;
    for (; k + 4 <= rank; k += 4) {
      Dots<4>(row, qt + k * cols, cols, cols, pt + k * rows + r, rows);
    }
    for (; k < rank; ++k) {
      Dots<1>(row, qt + k * cols, cols, cols, pt + k * rows + r, rows);
    }
  }
}

void LowRankProjectBack(const float* m, int64_t rows, int64_t cols,
                        const float* pt, int rank, float* qt) {
  for (int64_t i = 0; i < rank * cols; ++i) qt[i] = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = m + r * cols;
    for (int64_t c = 0; c < cols; c += 8) {
      const __m256 x = Load(row + c, cols - c);
      for (int k = 0; k < rank; ++k) {
        float* q = qt + k * cols + c;
        const __m256 a = _mm256_broadcast_ss(pt + k * rows + r);
        Store(q, cols - c, _mm256_fmadd_ps(a, x, Load(q, cols - c)));
      }
    }
  }
}

void LowRankExpand(const float* pt, const float* qt, int64_t rows, int64_t cols,
                   int rank, const LowRankExpansion& x) {
  const __m256 scale = _mm256_set1_ps(x.scale);
  const __m256 share = _mm256_set1_ps(x.share);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t at = r * cols;
    for (int64_t c = 0; c < cols; c += 8) {
      __m256 acc = _mm256_setzero_ps();
      for (int k = 0; k < rank; ++k) {
        acc = _mm256_fmadd_ps(_mm256_broadcast_ss(pt + k * rows + r),
                              Load(qt + k * cols + c, cols - c), acc);
      }
      const __m256 out = _mm256_mul_ps(acc, scale);
      Store(x.out + at + c, cols - c, out);
      Store(x.error + at + c, cols - c,
            _mm256_fnmadd_ps(share, out, Load(x.input + at + c, cols - c)));
    }
  }
}

}  // namespace cohort

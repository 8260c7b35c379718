#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/fast_exp.h"
#include "kernels/gemm.h"

namespace cohort {
namespace {

// exp: libm's in double; in float Cephes' expf (kernels/fast_exp.h, within
// 4e-7 relative), branch-free so that the softmax loop vectorises.
// Arguments here are <= 0 (the row maximum is subtracted first).
inline double Exp(double x) { return std::exp(x); }

inline __attribute__((always_inline)) float Exp(float a) { return FastExp(a); }

// row[0, n) <- softmax(scale * row[0, n)); row[n, end) <- 0 (masked keys).
template <typename T>
void SoftmaxRow(T* row, int64_t n, int64_t end, T scale) {
  T mx = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
  const T shift = mx * scale;
  T sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    const T e = Exp(row[j] * scale - shift);
    row[j] = e;
    sum += e;
  }
  const T inv = T(1) / sum;
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
  for (int64_t j = n; j < end; ++j) row[j] = 0;
}

// dst[0, n) = src * keep * scale (the dropped probabilities of one row).
template <typename T>
void DropRow(const T* src, const uint8_t* keep, T scale, T* dst, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    dst[j] = keep[j] ? src[j] * scale : T(0);
  }
}

// dP~ (in ds, row [0, n)) -> dS = scale * P * (dP - sum_j dP~ P~), where
// dP = dP~ * keep * keep_scale and P~ the dropped probabilities `pt`;
// zeros on [n, end).
template <typename T>
void SoftmaxBackwardRow(const T* p, const T* pt, const uint8_t* keep,
                        T keep_scale, T scale, T* ds, int64_t n, int64_t end) {
  T c = 0;
  for (int64_t j = 0; j < n; ++j) c += ds[j] * pt[j];
  if (keep == nullptr) {
    for (int64_t j = 0; j < n; ++j) ds[j] = scale * p[j] * (ds[j] - c);
  } else {
    for (int64_t j = 0; j < n; ++j) {
      const T dp = keep[j] ? ds[j] * keep_scale : T(0);
      ds[j] = scale * p[j] * (dp - c);
    }
  }
  for (int64_t j = n; j < end; ++j) ds[j] = 0;
}

// Row stride of the probabilities: L rounded up to 16, plus 16 elements.
// With L itself (256) every row of a block would map to the same few L1
// sets and the small products would thrash.
int64_t PaddedStride(int64_t len) { return (len + 15) / 16 * 16 + 16; }

}  // namespace

int64_t AttentionStride(int64_t columns) {
  return (columns + 15) / 16 * 16 + 16;
}

template <typename T>
void AttentionForward(const AttentionDims& d, const T* qkv, const uint8_t* keep,
                      T keep_scale, T* out, AttentionCache<T>* cache) {
  const int64_t n_count = d.batch, len = d.length, dim = d.dim;
  const int64_t heads = d.heads, dh = dim / heads;
  const int64_t nl = d.stride > 0 ? d.stride : n_count * len;
  const int64_t ld = PaddedStride(len);
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(dh)));
  cache->probs.resize(n_count * heads * len * ld);
  if (keep != nullptr) cache->scratch.resize(kQueryBlock * ld);
  for (int64_t n = 0; n < n_count; ++n) {
    for (int64_t h = 0; h < heads; ++h) {
      const T* q = qkv + h * dh * nl + n * len;
      const T* k = q + dim * nl;
      const T* v = k + dim * nl;
      T* o = out + h * dh * nl + n * len;
      const int64_t head = (n * heads + h) * len;
      T* p = cache->probs.data() + head * ld;
      const uint8_t* kp = keep != nullptr ? keep + head * len : nullptr;
      for (int64_t i0 = 0; i0 < len; i0 += kQueryBlock) {
        const int64_t b = std::min(kQueryBlock, len - i0);
        const int64_t kend = d.causal ? i0 + b : len;
        T* pb = p + i0 * ld;
        Gemm<T>(Trans::kYes, Trans::kNo, b, kend, dh, T(1), q + i0, nl, k, nl,
                T(0), pb, ld);
        for (int64_t r = 0; r < b; ++r) {
          SoftmaxRow(pb + r * ld, d.causal ? i0 + r + 1 : len, kend, scale);
        }
        const T* pt = pb;
        if (kp != nullptr) {
          T* s = cache->scratch.data();
          for (int64_t r = 0; r < b; ++r) {
            DropRow(pb + r * ld, kp + (i0 + r) * len, keep_scale, s + r * ld,
                    kend);
          }
          pt = s;
        }
        Gemm<T>(Trans::kNo, Trans::kYes, dh, b, kend, T(1), v, nl, pt, ld, T(0),
                o + i0, nl);
      }
    }
  }
}

template <typename T>
void AttentionBackward(const AttentionDims& d, const T* qkv,
                       const uint8_t* keep, T keep_scale, const T* grad_out,
                       T* grad_qkv, AttentionCache<T>* cache) {
  const int64_t n_count = d.batch, len = d.length, dim = d.dim;
  const int64_t heads = d.heads, dh = dim / heads;
  const int64_t nl = d.stride > 0 ? d.stride : n_count * len;
  const int64_t ld = PaddedStride(len);
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(dh)));
  // dK and dV accumulate over query blocks; dQ is written block by block.
  for (int64_t r = dim; r < 3 * dim; ++r) {
    std::fill(grad_qkv + r * nl, grad_qkv + r * nl + n_count * len, T(0));
  }
  cache->scratch.resize((keep != nullptr ? 2 : 1) * kQueryBlock * ld);
  T* ds = cache->scratch.data();
  T* dropped = ds + kQueryBlock * ld;
  for (int64_t n = 0; n < n_count; ++n) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t off = h * dh * nl + n * len;
      const T* q = qkv + off;
      const T* k = q + dim * nl;
      const T* v = k + dim * nl;
      T* dq = grad_qkv + off;
      T* dk = dq + dim * nl;
      T* dv = dk + dim * nl;
      const T* go = grad_out + off;
      const int64_t head = (n * heads + h) * len;
      const T* p = cache->probs.data() + head * ld;
      const uint8_t* kp = keep != nullptr ? keep + head * len : nullptr;
      for (int64_t i0 = 0; i0 < len; i0 += kQueryBlock) {
        const int64_t b = std::min(kQueryBlock, len - i0);
        const int64_t kend = d.causal ? i0 + b : len;
        const T* pb = p + i0 * ld;
        const T* pt = pb;
        if (kp != nullptr) {
          for (int64_t r = 0; r < b; ++r) {
            DropRow(pb + r * ld, kp + (i0 + r) * len, keep_scale,
                    dropped + r * ld, kend);
          }
          pt = dropped;
        }
        // dV[:, :kend] += dO_block P~_block.
        Gemm<T>(Trans::kNo, Trans::kNo, dh, kend, b, T(1), go + i0, nl, pt, ld,
                T(1), dv, nl);
        // dP~ = dO_block^T V[:, :kend].
        Gemm<T>(Trans::kYes, Trans::kNo, b, kend, dh, T(1), go + i0, nl, v, nl,
                T(0), ds, ld);
        for (int64_t r = 0; r < b; ++r) {
          const int64_t i = i0 + r;
          SoftmaxBackwardRow(pb + r * ld, pt + r * ld,
                             kp != nullptr ? kp + i * len : nullptr, keep_scale,
                             scale, ds + r * ld, d.causal ? i + 1 : len, kend);
        }
        // dQ_block = K[:, :kend] dS^T; dK[:, :kend] += Q_block dS.
        Gemm<T>(Trans::kNo, Trans::kYes, dh, b, kend, T(1), k, nl, ds, ld, T(0),
                dq + i0, nl);
        Gemm<T>(Trans::kNo, Trans::kNo, dh, kend, b, T(1), q + i0, nl, ds, ld,
                T(1), dk, nl);
      }
    }
  }
}

#define COHORT_INSTANTIATE_ATTENTION(T)                               \
  template void AttentionForward<T>(const AttentionDims&, const T*,   \
                                    const uint8_t*, T, T*,            \
                                    AttentionCache<T>*);              \
  template void AttentionBackward<T>(const AttentionDims&, const T*,  \
                                     const uint8_t*, T, const T*, T*, \
                                     AttentionCache<T>*);

COHORT_INSTANTIATE_ATTENTION(float)
COHORT_INSTANTIATE_ATTENTION(double)
#undef COHORT_INSTANTIATE_ATTENTION

}  // namespace cohort

#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/fast_exp.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "kernels/row_max.h"
#include "kernels/wide_vectors.h"

namespace cohort {
namespace {

// exp: libm's in double; in float Cephes' expf (kernels/fast_exp.h, within
// 4e-7 relative), branch-free so that the softmax loop vectorises.
// Arguments here are <= 0 (the row maximum is subtracted first).
inline double Exp(double x) { return std::exp(x); }

inline __attribute__((always_inline)) float Exp(float a) { return FastExp(a); }

// row[0, n) <- softmax(scale * row[0, n)); row[n, end) <- 0 (masked keys).
template <typename T>
inline __attribute__((always_inline)) void SoftmaxRow(T* row, int64_t n,
                                                      int64_t end, T scale) {
  const T mx = RowMax(row, n);
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
inline __attribute__((always_inline)) void SoftmaxBackwardRow(
    const T* p, const T* pt, const uint8_t* keep, T keep_scale, T scale, T* ds,
    int64_t n, int64_t end) {
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

// The float rows with AVX-512 where the machine has it (wide_vectors.h):
// the exponentials are most of the softmax's work. Its sums then add in
// sixteen lanes instead of eight, so the bits differ between machines,
// never between runs on one.
COHORT_WIDE_VECTORS void WideSoftmaxRow(float* row, int64_t n, int64_t end,
                                        float scale) {
  SoftmaxRow(row, n, end, scale);
}

COHORT_WIDE_VECTORS void WideSoftmaxBackwardRow(const float* p, const float* pt,
                                                const uint8_t* keep,
                                                float keep_scale, float scale,
                                                float* ds, int64_t n,
                                                int64_t end) {
  SoftmaxBackwardRow(p, pt, keep, keep_scale, scale, ds, n, end);
}

template <typename T>
void RowSoftmax(T* row, int64_t n, int64_t end, T scale) {
  if constexpr (std::is_same_v<T, float>) {
    WideSoftmaxRow(row, n, end, scale);
  } else {
    SoftmaxRow(row, n, end, scale);
  }
}

template <typename T>
void RowSoftmaxBackward(const T* p, const T* pt, const uint8_t* keep,
                        T keep_scale, T scale, T* ds, int64_t n, int64_t end) {
  if constexpr (std::is_same_v<T, float>) {
    WideSoftmaxBackwardRow(p, pt, keep, keep_scale, scale, ds, n, end);
  } else {
    SoftmaxBackwardRow(p, pt, keep, keep_scale, scale, ds, n, end);
  }
}

// Row stride of the probabilities: L rounded up to 16, plus 16 elements.
// With L itself (256) every row of a block would map to the same few L1
// sets and the small products would thrash.
int64_t PaddedStride(int64_t len) { return (len + 15) / 16 * 16 + 16; }

}  // namespace

int64_t AttentionStride(int64_t columns) {
  return (columns + 15) / 16 * 16 + 16;
}

namespace {

// The (sample, head) pairs are independent: OverHeads runs body(pair, slot)
// for each, on the compute threads in float (whose products are the
// single-threaded kernels of gemm_small.h) and in order in double (whose
// go to OpenBLAS's threads); `slot`, below Slots<T>(), names the scratch
// the call may use alone. Each pair is computed alike on any thread, so
// the result does not depend on the count.
template <typename T>
int64_t Slots() {
  if constexpr (!std::is_same_v<T, float>) return 1;
  return RangeSlots();
}

template <typename T, typename Body>
void OverHeads(int64_t pairs, const Body& body) {
  if constexpr (!std::is_same_v<T, float>) {
    for (int64_t i = 0; i < pairs; ++i) body(i, int64_t{0});
  } else {
    ParallelItems(pairs, 1, [&](int64_t first, int64_t last) {
      const int64_t slot = RangeSlot();
      for (int64_t i = first; i < last; ++i) body(i, slot);
    });
  }
}

// Where one (sample, head) pair's rows start in the {rows, N * L} buffers,
// and its slice of the probabilities.
struct Head {
  int64_t off;    // h * dh * nl + n * len
  int64_t probs;  // (n * heads + h) * len: its first row of P
};

Head HeadAt(const AttentionDims& d, int64_t pair, int64_t nl) {
  const int64_t n = pair / d.heads, h = pair % d.heads;
  const int64_t dh = d.dim / d.heads;
  return {h * dh * nl + n * d.length, pair * d.length};
}

}  // namespace

template <typename T>
void AttentionForward(const AttentionDims& d, const T* qkv, const uint8_t* keep,
                      T keep_scale, T* out, AttentionCache<T>* cache) {
  const int64_t len = d.length, dim = d.dim;
  const int64_t dh = dim / d.heads;
  const int64_t nl = d.stride > 0 ? d.stride : d.batch * len;
  const int64_t ld = PaddedStride(len);
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(dh)));
  cache->probs.resize(d.batch * d.heads * len * ld);
  const int64_t scratch = SlotLength<T>(kQueryBlock * ld);
  if (keep != nullptr) cache->scratch.resize(Slots<T>() * scratch);
  OverHeads<T>(d.batch * d.heads, [&](int64_t pair, int64_t slot) {
    const Head at = HeadAt(d, pair, nl);
    const T* q = qkv + at.off;
    const T* k = q + dim * nl;
    const T* v = k + dim * nl;
    T* o = out + at.off;
    T* p = cache->probs.data() + at.probs * ld;
    const uint8_t* kp = keep != nullptr ? keep + at.probs * len : nullptr;
    for (int64_t i0 = 0; i0 < len; i0 += kQueryBlock) {
      const int64_t b = std::min(kQueryBlock, len - i0);
      const int64_t kend = d.causal ? i0 + b : len;
      T* pb = p + i0 * ld;
      Gemm<T>(Trans::kYes, Trans::kNo, b, kend, dh, T(1), q + i0, nl, k, nl,
              T(0), pb, ld);
      for (int64_t r = 0; r < b; ++r) {
        RowSoftmax(pb + r * ld, d.causal ? i0 + r + 1 : len, kend, scale);
      }
      const T* pt = pb;
      if (kp != nullptr) {
        T* s = cache->scratch.data() + slot * scratch;
        for (int64_t r = 0; r < b; ++r) {
          DropRow(pb + r * ld, kp + (i0 + r) * len, keep_scale, s + r * ld,
                  kend);
        }
        pt = s;
      }
      Gemm<T>(Trans::kNo, Trans::kYes, dh, b, kend, T(1), v, nl, pt, ld, T(0),
              o + i0, nl);
    }
  });
}

namespace {

// One (sample, head) pair's share of AttentionBackward; `ds` and `dropped`
// are the caller's scratch of one query block each.
template <typename T>
void HeadBackward(const AttentionDims& d, const Head& at, const T* qkv,
                  const uint8_t* keep, T keep_scale, const T* grad_out,
                  T* grad_qkv, const T* probs, T* ds, T* dropped) {
  const int64_t len = d.length, dim = d.dim, dh = dim / d.heads;
  const int64_t nl = d.stride > 0 ? d.stride : d.batch * len;
  const int64_t ld = PaddedStride(len);
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(dh)));
  const T* q = qkv + at.off;
  const T* k = q + dim * nl;
  const T* v = k + dim * nl;
  T* dq = grad_qkv + at.off;
  T* dk = dq + dim * nl;
  T* dv = dk + dim * nl;
  const T* go = grad_out + at.off;
  const T* p = probs + at.probs * ld;
  const uint8_t* kp = keep != nullptr ? keep + at.probs * len : nullptr;
  // dK and dV accumulate over query blocks; dQ is written block by block.
  // The pair's own rows and columns are cleared here, on the thread that
  // accumulates into them next.
  for (int64_t r = 0; r < dh; ++r) {
    std::fill(dk + r * nl, dk + r * nl + len, T(0));
    std::fill(dv + r * nl, dv + r * nl + len, T(0));
  }
  for (int64_t i0 = 0; i0 < len; i0 += kQueryBlock) {
    const int64_t b = std::min(kQueryBlock, len - i0);
    const int64_t kend = d.causal ? i0 + b : len;
    const T* pb = p + i0 * ld;
    const T* pt = pb;
    if (kp != nullptr) {
      for (int64_t r = 0; r < b; ++r) {
        DropRow(pb + r * ld, kp + (i0 + r) * len, keep_scale, dropped + r * ld,
                kend);
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
      RowSoftmaxBackward(pb + r * ld, pt + r * ld,
                         kp != nullptr ? kp + i * len : nullptr, keep_scale,
                         scale, ds + r * ld, d.causal ? i + 1 : len, kend);
    }
    // dQ_block = K[:, :kend] dS^T; dK[:, :kend] += Q_block dS.
    Gemm<T>(Trans::kNo, Trans::kYes, dh, b, kend, T(1), k, nl, ds, ld, T(0),
            dq + i0, nl);
    Gemm<T>(Trans::kNo, Trans::kNo, dh, kend, b, T(1), q + i0, nl, ds, ld, T(1),
            dk, nl);
  }
}

}  // namespace

template <typename T>
void AttentionBackward(const AttentionDims& d, const T* qkv,
                       const uint8_t* keep, T keep_scale, const T* grad_out,
                       T* grad_qkv, AttentionCache<T>* cache) {
  const int64_t nl = d.stride > 0 ? d.stride : d.batch * d.length;
  const int64_t ld = PaddedStride(d.length);
  const int64_t block = kQueryBlock * ld;
  const int64_t per_slot = SlotLength<T>((keep != nullptr ? 2 : 1) * block);
  cache->scratch.resize(Slots<T>() * per_slot);
  OverHeads<T>(d.batch * d.heads, [&](int64_t pair, int64_t slot) {
    T* ds = cache->scratch.data() + slot * per_slot;
    HeadBackward(d, HeadAt(d, pair, nl), qkv, keep, keep_scale, grad_out,
                 grad_qkv, cache->probs.data(), ds, ds + block);
  });
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

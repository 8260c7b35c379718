#include "kernels/interaction.h"

#include <algorithm>

#include "kernels/interaction_simd.h"
#include "kernels/parallel.h"

namespace cohort {
namespace {

using interaction_internal::Simd;

// Samples per range on the compute threads: a sample of DLRM's 27 x 16
// takes under a microsecond each way, so a range of 64 is tens of
// microseconds, enough to pay for waking a thread.
constexpr int64_t kSampleGrain = 64;

// Vectors of dV one backward block accumulates in registers (rows times
// vectors per row): 8 independent FMA chains hide the FMA latency on two
// ports and leave registers for the loaded vectors of V.
constexpr int kBlockVectors = 8;

// Index of pair (i, 0) among a sample's pairs.
inline int64_t RowStart(int64_t i) { return i * (i - 1) / 2; }

// Sums of products of v_i with the lanes' vectors v_j (one group of
// pairs), for any dim: v_j_k = vj + off[k], the last vector masked.
template <typename T>
typename Simd<T>::V GroupSums(const T* vi, const T* vj, const int64_t* off,
                              int64_t dim) {
  using S = Simd<T>;
  constexpr int L = S::kLanes;
  typename S::V p[L];
  for (int k = 0; k < L; ++k) p[k] = S::Zero();
  const int64_t full = dim / L * L;
  for (int64_t d = 0; d < full; d += L) {
    const typename S::V a = S::Load(vi + d);
#pragma GCC unroll 8
    for (int k = 0; k < L; ++k) {
      p[k] = S::Fma(a, S::Load(vj + off[k] + d), p[k]);
    }
  }
  if (full < dim) {
    const __m256i tail = S::FirstLanes(dim - full);
    const typename S::V a = S::Load(vi + full, tail);
#pragma GCC unroll 8
    for (int k = 0; k < L; ++k) {
      p[k] = S::Fma(a, S::Load(vj + off[k] + full, tail), p[k]);
    }
  }
  return S::SumEach(p);
}

// GroupSums for a dim of kChunks whole vectors, v_j_k = vj + k dim: the
// lanes' vectors are one base address and constant offsets, and v_i
// stays in registers across the row.
template <typename T, int kChunks>
typename Simd<T>::V GroupSums(const typename Simd<T>::V* vi, const T* vj) {
  using S = Simd<T>;
  constexpr int L = S::kLanes;
  typename S::V p[L];
#pragma GCC unroll 8
  for (int k = 0; k < L; ++k) {
    p[k] = S::Mul(vi[0], S::Load(vj + k * kChunks * L));
  }
#pragma GCC unroll 8
  for (int c = 1; c < kChunks; ++c) {
#pragma GCC unroll 8
    for (int k = 0; k < L; ++k) {
      p[k] = S::Fma(vi[c], S::Load(vj + (k * kChunks + c) * L), p[k]);
    }
  }
  return S::SumEach(p);
}

// pair[j] = dot(v_i, v_j) for j < i, a group of pairs (a vector) at a
// time; a row's last group is partial. Groups that would read past the
// sample's last vector repeat v_{i-1} in the lanes past i (read, never
// stored). kChunks > 0: dim is kChunks whole vectors.
template <typename T, int kChunks>
void ForwardRow(const T* v, int64_t i, int64_t vectors, int64_t dim, T* pair) {
  using S = Simd<T>;
  constexpr int L = S::kLanes;
  const T* vi = v + i * dim;
  typename S::V vi_chunks[kChunks > 0 ? kChunks : 1];
  for (int c = 0; c < kChunks; ++c) vi_chunks[c] = S::Load(vi + c * L);
  for (int64_t j0 = 0; j0 < i; j0 += L) {
    const T* vj = v + j0 * dim;
    typename S::V sums;
    if (kChunks > 0 && j0 + L <= vectors) {
      sums = GroupSums<T, kChunks>(vi_chunks, vj);
    } else {
      int64_t off[L];
      for (int k = 0; k < L; ++k) {
        off[k] = std::min<int64_t>(k, i - 1 - j0) * dim;
      }
      sums = GroupSums(vi, vj, off, dim);
    }
    const int64_t count = std::min<int64_t>(L, i - j0);
    if (count == L) {
      S::Store(pair + j0, sums);
    } else {
      S::Store(pair + j0, S::FirstLanes(count), sums);
    }
  }
}

template <typename T, int kChunks>
void ForwardSample(const T* v, int64_t vectors, int64_t dim, T* out) {
  std::copy(v, v + dim, out);
  for (int64_t i = 1; i < vectors; ++i) {
    ForwardRow<T, kChunks>(v, i, vectors, dim, out + dim + RowStart(i));
  }
}

// The forward of a sample for `dim`: unrolled for 1, 2, 4 or 8 whole
// vectors (DLRM's dims of 16 to 64 floats), any dim otherwise.
template <typename T>
auto ChooseForward(int64_t dim) {
  constexpr int L = Simd<T>::kLanes;
  switch (dim % L == 0 ? dim / L : 0) {
    case 1:
      return &ForwardSample<T, 1>;
    case 2:
      return &ForwardSample<T, 2>;
    case 4:
      return &ForwardSample<T, 4>;
    case 8:
      return &ForwardSample<T, 8>;
    default:
      return &ForwardSample<T, 0>;
  }
}

// Features [c, c + NV vectors) of kRows rows of one sample's dV, held in
// registers while every v_j is added with its coefficient G[i][j] +
// G[j][i]: G's row i for j < i, G's column i for j > i, both read in place
// from the pairs' gradient. With kMasked each vector keeps only the lanes
// inside the chunk's width. Rows past the sample's last repeat the last row
// (computed and stored twice, with the same values).
//
// Points into the caller's buffers of one sample and owns nothing; a block
// is used by one thread.
template <typename T, int NV, bool kMasked>
class BackwardBlock {
 public:
  using S = Simd<T>;
  using V = typename S::V;
  static constexpr int kRows = kBlockVectors / NV;

  BackwardBlock(const T* v, const T* g, int64_t vectors, int64_t dim, int64_t c,
                int64_t width)
      : v_(v + c), g_(g + c), gp_(g + dim), vectors_(vectors), dim_(dim) {
    for (int q = 0; q < NV; ++q) {
      mask_[q] = S::FirstLanes(
          std::clamp<int64_t>(width - q * S::kLanes, 0, S::kLanes));
    }
  }

  // Rows i0.. of dV, stored at dv (the sample's dV, offset by c).
  void Run(int64_t i0, T* dv) {
    Start(i0);
    for (int64_t j = 0; j < i0; ++j) {
      const V* x = LoadV(j);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) Add(r, grow_[r] + j, x);
    }
    const int64_t own_end = std::min<int64_t>(i0 + kRows, vectors_);
    for (int64_t j = i0; j < own_end; ++j) {
      const V* x = LoadV(j);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        if (row_[r] == j) continue;
        Add(r, j < row_[r] ? grow_[r] + j : gp_ + RowStart(j) + row_[r], x);
      }
    }
    for (int64_t j = own_end; j < vectors_; ++j) {
      const V* x = LoadV(j);
      const T* gcol = gp_ + RowStart(j);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) Add(r, gcol + row_[r], x);
    }
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      T* out = dv + row_[r] * dim_;
#pragma GCC unroll 8
      for (int q = 0; q < NV; ++q) {
        if (kMasked) {
          S::Store(out + q * S::kLanes, mask_[q], acc_[r][q]);
        } else {
          S::Store(out + q * S::kLanes, acc_[r][q]);
        }
      }
    }
  }

 private:
  V Load(const T* p, int q) const {
    return kMasked ? S::Load(p + q * S::kLanes, mask_[q])
                   : S::Load(p + q * S::kLanes);
  }

  // Row 0 starts from v_0's pass-through gradient, the others from zero.
  void Start(int64_t i0) {
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      row_[r] = std::min<int64_t>(i0 + r, vectors_ - 1);
      grow_[r] = gp_ + RowStart(row_[r]);
#pragma GCC unroll 8
      for (int q = 0; q < NV; ++q) {
        acc_[r][q] = row_[r] == 0 ? Load(g_, q) : S::Zero();
      }
    }
  }

  const V* LoadV(int64_t j) {
#pragma GCC unroll 8
    for (int q = 0; q < NV; ++q) x_[q] = Load(v_ + j * dim_, q);
    return x_;
  }

  void Add(int r, const T* coef, const V* x) {
    const V s = S::Broadcast(coef);
#pragma GCC unroll 8
    for (int q = 0; q < NV; ++q) acc_[r][q] = S::Fma(s, x[q], acc_[r][q]);
  }

  const T* v_;   // v_0's first feature of the chunk
  const T* g_;   // the chunk of v_0's pass-through gradient
  const T* gp_;  // the pairs' gradient
  int64_t vectors_, dim_;
  __m256i mask_[NV];
  int64_t row_[kRows];
  const T* grow_[kRows];  // G's row row_[r]
  V acc_[kRows][NV];
  V x_[NV];
};

template <typename T, int NV, bool kMasked>
void BackwardColumns(const T* v, const T* g, int64_t vectors, int64_t dim,
                     int64_t c, int64_t width, T* dv) {
  BackwardBlock<T, NV, kMasked> block(v, g, vectors, dim, c, width);
  for (int64_t i0 = 0; i0 < vectors; i0 += block.kRows) block.Run(i0, dv + c);
}

// dV in chunks of up to kBlockVectors vectors of features (whole rows for
// DLRM's dims), each chunk rounded up to 1, 2, 4 or 8 vectors and masked
// where that passes its width. Whole rows keep the reads of V and the
// writes of dV in address order, which the hardware prefetchers follow
// when the batch is larger than the caches (27 x 64 at a batch of 1024:
// 2.2 times faster than passes over chunks of two vectors).
template <typename T>
void BackwardSample(const T* v, const T* g, int64_t vectors, int64_t dim,
                    T* dv) {
  using Fn =
      void (*)(const T*, const T*, int64_t, int64_t, int64_t, int64_t, T*);
  static constexpr Fn kColumns[4][2] = {
      {&BackwardColumns<T, 1, false>, &BackwardColumns<T, 1, true>},
      {&BackwardColumns<T, 2, false>, &BackwardColumns<T, 2, true>},
      {&BackwardColumns<T, 4, false>, &BackwardColumns<T, 4, true>},
      {&BackwardColumns<T, 8, false>, &BackwardColumns<T, 8, true>},
  };
  constexpr int64_t L = Simd<T>::kLanes;
  for (int64_t c = 0; c < dim; c += kBlockVectors * L) {
    const int64_t width = std::min(kBlockVectors * L, dim - c);
    const int64_t needed = (width + L - 1) / L;
    const int log_nv = needed <= 1 ? 0 : needed <= 2 ? 1 : needed <= 4 ? 2 : 3;
    const bool masked = width != (L << log_nv);
    kColumns[log_nv][masked](v, g, vectors, dim, c, width, dv);
  }
}

}  // namespace

template <typename T>
void DotInteractionForward(const T* x, int64_t n, int64_t vectors, int64_t dim,
                           T* y) {
  const int64_t features = vectors * dim;
  const int64_t outputs = DotInteractionOutputs(vectors, dim);
  const auto forward = ChooseForward<T>(dim);
  ParallelRanges(n, kSampleGrain, [&](int64_t a, int64_t b) {
    for (int64_t s = a; s < b; ++s) {
      forward(x + s * features, vectors, dim, y + s * outputs);
    }
  });
}

template <typename T>
void DotInteractionBackward(const T* x, const T* grad_y, int64_t n,
                            int64_t vectors, int64_t dim, T* grad_x) {
  const int64_t features = vectors * dim;
  const int64_t outputs = DotInteractionOutputs(vectors, dim);
  ParallelRanges(n, kSampleGrain, [&](int64_t a, int64_t b) {
    for (int64_t s = a; s < b; ++s) {
      BackwardSample(x + s * features, grad_y + s * outputs, vectors, dim,
                     grad_x + s * features);
    }
  });
}

template void DotInteractionForward(const float*, int64_t, int64_t, int64_t,
                                    float*);
template void DotInteractionForward(const double*, int64_t, int64_t, int64_t,
                                    double*);
template void DotInteractionBackward(const float*, const float*, int64_t,
                                     int64_t, int64_t, float*);
template void DotInteractionBackward(const double*, const double*, int64_t,
                                     int64_t, int64_t, double*);

}  // namespace cohort

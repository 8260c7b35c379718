// What a channel-blocked (nChw8c) forward kernel applies to each output
// vector before storing it, internal to kernels/: out = y * scale[oc] +
// shift[oc] (+ residual), then ReLU when `relu`. A training forward's bias
// is scale null (1) and shift the bias: fma(y, 1, b) rounds as y + b does,
// so the bias costs no extra rounding. Evaluation folds a batch norm into
// scale and shift and the block's sum and ReLU into the rest.
//
// Ownership: the pointers are the caller's. Thread safety: plain values.
#ifndef COHORT_KERNELS_CONV_EPILOGUE_H_
#define COHORT_KERNELS_CONV_EPILOGUE_H_

#include <immintrin.h>

#include <cstdint>

namespace cohort {
namespace conv_internal {

struct ConvEpilogue {
  const float* scale = nullptr;     // [OC], or null for 1
  const float* shift = nullptr;     // [OC], or null for 0
  const float* residual = nullptr;  // the output's layout, or null
  bool relu = false;
};

// The epilogue of one block of 8 output channels: their scale and shift,
// and the residual's plane of those channels (or null).
struct BlockEpilogue {
  __m256 scale, shift;
  const float* residual;
  bool relu;
};

// Block `cb` of `e`, whose output plane starts `plane_offset` floats into
// the output (and the residual).
inline BlockEpilogue ForBlock(const ConvEpilogue& e, int64_t cb,
                              int64_t plane_offset) {
  const int64_t c = cb * 8;
  return {
      e.scale != nullptr ? _mm256_loadu_ps(e.scale + c) : _mm256_set1_ps(1.0f),
      e.shift != nullptr ? _mm256_loadu_ps(e.shift + c) : _mm256_setzero_ps(),
      e.residual != nullptr ? e.residual + plane_offset : nullptr, e.relu};
}

// Stores y through the epilogue at `at` floats into the block's plane.
inline void StoreThrough(const BlockEpilogue& e, __m256 y, float* plane,
                         int64_t at) {
  y = _mm256_fmadd_ps(y, e.scale, e.shift);
  if (e.residual != nullptr) {
    y = _mm256_add_ps(y, _mm256_loadu_ps(e.residual + at));
  }
  if (e.relu) y = _mm256_max_ps(y, _mm256_setzero_ps());
  _mm256_storeu_ps(plane + at, y);
}

}  // namespace conv_internal
}  // namespace cohort

#endif  // COHORT_KERNELS_CONV_EPILOGUE_H_

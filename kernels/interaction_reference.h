// The dot interaction as a plain per-sample loop (one dot product per pair,
// one pair at a time): the definition kernels/interaction.h's kernels are
// tested and benchmarked against. Header-only; stateless and thread-safe.
#ifndef COHORT_KERNELS_INTERACTION_REFERENCE_H_
#define COHORT_KERNELS_INTERACTION_REFERENCE_H_

#include <algorithm>
#include <cstdint>

#include "kernels/interaction.h"

namespace cohort {
namespace interaction_reference {

template <typename T>
T Dot(const T* a, const T* b, int64_t n) {
  T s = 0;
  for (int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// One sample: out = [v_0, dot(v_i, v_j) for i = 1..T, j < i].
template <typename T>
void ForwardSample(const T* v, int64_t vectors, int64_t dim, T* out) {
  std::copy(v, v + dim, out);
  T* pair = out + dim;
  for (int64_t i = 1; i < vectors; ++i) {
    for (int64_t j = 0; j < i; ++j) {
      *pair++ = Dot(v + i * dim, v + j * dim, dim);
    }
  }
}

// One sample's input gradient: dv_0 starts from the output gradient of the
// copied v_0, every other dv_k from zero; pair (i, j) with gradient g adds
// g v_j to dv_i and g v_i to dv_j.
template <typename T>
void BackwardSample(const T* v, const T* g, int64_t vectors, int64_t dim,
                    T* dv) {
  std::copy(g, g + dim, dv);
  std::fill(dv + dim, dv + vectors * dim, T(0));
  const T* pair = g + dim;
  for (int64_t i = 1; i < vectors; ++i) {
    T* di = dv + i * dim;
    const T* vi = v + i * dim;
    for (int64_t j = 0; j < i; ++j) {
      const T gij = *pair++;
      T* dj = dv + j * dim;
      const T* vj = v + j * dim;
      for (int64_t d = 0; d < dim; ++d) {
        di[d] += gij * vj[d];
        dj[d] += gij * vi[d];
      }
    }
  }
}

// The batch forms of DotInteractionForward and DotInteractionBackward, on
// the calling thread.
template <typename T>
void Forward(const T* x, int64_t n, int64_t vectors, int64_t dim, T* y) {
  const int64_t outputs = DotInteractionOutputs(vectors, dim);
  for (int64_t s = 0; s < n; ++s) {
    ForwardSample(x + s * vectors * dim, vectors, dim, y + s * outputs);
  }
}

template <typename T>
void Backward(const T* x, const T* grad_y, int64_t n, int64_t vectors,
              int64_t dim, T* grad_x) {
  const int64_t outputs = DotInteractionOutputs(vectors, dim);
  for (int64_t s = 0; s < n; ++s) {
    BackwardSample(x + s * vectors * dim, grad_y + s * outputs, vectors, dim,
                   grad_x + s * vectors * dim);
  }
}

}  // namespace interaction_reference
}  // namespace cohort

#endif  // COHORT_KERNELS_INTERACTION_REFERENCE_H_

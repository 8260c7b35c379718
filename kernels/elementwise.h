// Elementwise CPU kernels over contiguous arrays, and a shape helper that
// keeps the steady state of a training step free of allocations.
//
// The kernels are plain functions of raw pointers; they own nothing and keep
// no state, so they are thread-safe for disjoint outputs. Inputs and outputs
// of one call must not overlap unless a kernel says otherwise. Instantiated
// for float and double.
#ifndef COHORT_KERNELS_ELEMENTWISE_H_
#define COHORT_KERNELS_ELEMENTWISE_H_

#include <cstdint>
#include <initializer_list>

#include "common/tensor.h"
#include "kernels/fused_activation.h"

namespace cohort {

// Resizes `t` only when its shape differs from `dims`. BasicTensor::Resize
// takes a Shape by value, so calling it every step would allocate a vector
// every step even when the storage is reused.
template <typename T>
void EnsureShape(BasicTensor<T>* t, std::initializer_list<int64_t> dims) {
  const Shape& s = t->shape();
  bool same = s.size() == dims.size();
  for (size_t i = 0; same && i < s.size(); ++i) same = s[i] == dims.begin()[i];
  if (!same) t->Resize(Shape(dims));
}
template <typename T>
void EnsureShape(BasicTensor<T>* t, const Shape& shape) {
  if (t->shape() != shape) t->Resize(shape);
}

// out = max(in, 0). `out` may equal `in`.
template <typename T>
void ReluForward(const T* in, T* out, int64_t n);

// grad_in = in > 0 ? grad_out : 0, with `in` the forward input (or output:
// both have the same sign pattern). `grad_in` may equal `grad_out`.
template <typename T>
void ReluBackward(const T* in, const T* grad_out, T* grad_in, int64_t n);

// y += x.
template <typename T>
void AddInPlace(const T* x, T* y, int64_t n);

// out = a + b.
template <typename T>
void Add(const T* a, const T* b, T* out, int64_t n);

// out[r * cols + c] = a[...] + (b[...] + bias[r]) over `rows` rows of `cols`
// elements: a channel-major product's per-row bias added in the pass that
// adds a residual, with the bits of adding the bias first. `out` may equal
// `a` or `b`.
template <typename T>
void AddRowBias(const T* a, const T* b, const T* bias, int64_t rows,
                int64_t cols, T* out);

// out = act(a + b), the sum rounded first (the bits of Add and then the
// activation layer). `out` may equal `a` or `b`.
template <typename T>
void AddActivated(const T* a, const T* b, FusedActivation act, T* out,
                  int64_t n);

// grad_in = grad_out where the activation's output y lets the gradient
// pass (fused_activation.h Passes), else +0: the activation layer's
// gradient, taken from its output. `grad_in` may equal `grad_out`.
template <typename T>
void ActivationGradFromOutput(const T* y, const T* grad_out,
                              FusedActivation act, T* grad_in, int64_t n);

// y *= x.
template <typename T>
void MulInPlace(const T* x, T* y, int64_t n);

// y[i * plane + j] *= scale[i] for `planes` contiguous planes: one factor
// per plane (a per-channel gate over a feature map).
template <typename T>
void ScalePlanesInPlace(const T* scale, T* y, int64_t planes, int64_t plane);

// out[i] = the sum of plane i of x, for `planes` contiguous planes.
template <typename T>
void SumPlanes(const T* x, T* out, int64_t planes, int64_t plane);

// out = in * (scale * mask), mask elements 0 or 1 (inverted dropout).
template <typename T>
void MaskedScale(const T* in, const uint8_t* mask, T scale, T* out, int64_t n);

}  // namespace cohort

#endif  // COHORT_KERNELS_ELEMENTWISE_H_

#include "kernels/elementwise.h"

#include "kernels/parallel.h"

namespace cohort {

// The loops are written for GCC's auto-vectorizer: this library is built
// with -fvect-cost-model=dynamic (see kernels/BUILD), because the default
// very-cheap model at -O2 leaves even these maps scalar.

namespace {

// The serial loops. Each range of a parallel call runs one of these on
// plain pointers: a loop reading its pointers through a lambda's captures
// is not vectorized (measured 6x slower for ReluBackward).

template <typename T>
void ReluLoop(const T* in, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = Activate<FusedActivation::kRelu>(in[i]);
}

template <typename T>
void AddInPlaceLoop(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

template <typename T>
void AddLoop(const T* a, const T* b, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <typename T>
void AddBiasedLoop(const T* a, const T* b, T bias, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + (b[i] + bias);
}

template <FusedActivation A, typename T>
void AddActivatedLoop(const T* a, const T* b, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = Activate<A>(a[i] + b[i]);
}

template <FusedActivation A, typename T>
void GradFromOutputLoop(const T* y, const T* grad_out, T* grad_in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    grad_in[i] = Passes<A>(y[i]) ? grad_out[i] : T(0);
  }
}

}  // namespace

// The streaming maps run on the compute threads (parallel.h) when long
// enough.

template <typename T>
void ReluForward(const T* in, T* out, int64_t n) {
  ParallelRanges(n, kElementwiseGrain, [&](int64_t b, int64_t e) {
    ReluLoop(in + b, out + b, e - b);
  });
}

template <typename T>
void ReluBackward(const T* in, const T* grad_out, T* grad_in, int64_t n) {
  ParallelRanges(n, kElementwiseGrain, [&](int64_t b, int64_t e) {
    // The ReLU's input and output pass the gradient at the same places.
    GradFromOutputLoop<FusedActivation::kRelu>(in + b, grad_out + b,
                                               grad_in + b, e - b);
  });
}

template <typename T>
void AddInPlace(const T* x, T* y, int64_t n) {
  ParallelRanges(n, kElementwiseGrain, [&](int64_t b, int64_t e) {
    AddInPlaceLoop(x + b, y + b, e - b);
  });
}

template <typename T>
void Add(const T* a, const T* b, T* out, int64_t n) {
  ParallelRanges(n, kElementwiseGrain, [&](int64_t first, int64_t last) {
    AddLoop(a + first, b + first, out + first, last - first);
  });
}

template <typename T>
void AddRowBias(const T* a, const T* b, const T* bias, int64_t rows,
                int64_t cols, T* out) {
  ParallelItems(rows, ItemGrain(cols), [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const int64_t o = r * cols;
      AddBiasedLoop(a + o, b + o, bias[r], out + o, cols);
    }
  });
}

template <typename T>
void AddActivated(const T* a, const T* b, FusedActivation act, T* out,
                  int64_t n) {
  WithActivation(act, [&](auto k) {
    ParallelRanges(n, kElementwiseGrain, [&](int64_t first, int64_t last) {
      AddActivatedLoop<decltype(k)::value>(a + first, b + first, out + first,
                                           last - first);
    });
  });
}

template <typename T>
void ActivationGradFromOutput(const T* y, const T* grad_out,
                              FusedActivation act, T* grad_in, int64_t n) {
  WithActivation(act, [&](auto k) {
    ParallelRanges(n, kElementwiseGrain, [&](int64_t first, int64_t last) {
      GradFromOutputLoop<decltype(k)::value>(y + first, grad_out + first,
                                             grad_in + first, last - first);
    });
  });
}

template <typename T>
void MulInPlace(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= x[i];
}

template <typename T>
void ScalePlanesInPlace(const T* scale, T* y, int64_t planes, int64_t plane) {
  for (int64_t i = 0; i < planes; ++i) {
    const T s = scale[i];
    T* row = y + i * plane;
    for (int64_t j = 0; j < plane; ++j) row[j] *= s;
  }
}

template <typename T>
void SumPlanes(const T* x, T* out, int64_t planes, int64_t plane) {
  for (int64_t i = 0; i < planes; ++i) {
    const T* row = x + i * plane;
    T sum = T(0);
    for (int64_t j = 0; j < plane; ++j) sum += row[j];
    out[i] = sum;
  }
}

template <typename T>
void MaskedScale(const T* in, const uint8_t* mask, T scale, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] * (scale * T(mask[i]));
}

#define COHORT_INSTANTIATE(T)                                                 \
  template void ReluForward<T>(const T*, T*, int64_t);                        \
  template void ReluBackward<T>(const T*, const T*, T*, int64_t);             \
  template void AddInPlace<T>(const T*, T*, int64_t);                         \
  template void Add<T>(const T*, const T*, T*, int64_t);                      \
  template void AddRowBias<T>(const T*, const T*, const T*, int64_t, int64_t, \
                              T*);                                            \
  template void AddActivated<T>(const T*, const T*, FusedActivation, T*,      \
                                int64_t);                                     \
  template void ActivationGradFromOutput<T>(const T*, const T*,               \
                                            FusedActivation, T*, int64_t);    \
  template void MulInPlace<T>(const T*, T*, int64_t);                         \
  template void ScalePlanesInPlace<T>(const T*, T*, int64_t, int64_t);        \
  template void SumPlanes<T>(const T*, T*, int64_t, int64_t);                 \
  template void MaskedScale<T>(const T*, const uint8_t*, T, T*, int64_t);
COHORT_INSTANTIATE(float)
COHORT_INSTANTIATE(double)
#undef COHORT_INSTANTIATE

}  // namespace cohort

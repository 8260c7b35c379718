#include "kernels/prelu.h"

#include <algorithm>

namespace cohort {
namespace {

// y[i] = x > 0 ? x : a * x over n contiguous elements of one slope.
template <typename T>
void Scale(const T* x, T a, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : a * x[i];
}

// One row of `c` channels, each its own slope (inner = 1).
template <typename T>
void ScaleRow(const T* x, const T* a, T* y, int64_t c) {
  for (int64_t i = 0; i < c; ++i) y[i] = x[i] > T(0) ? x[i] : a[i] * x[i];
}

// The slope gradient of n contiguous elements: sum of x * dy where x <= 0.
template <typename T>
T SlopeGradient(const T* x, const T* dy, int64_t n) {
  T sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i] > T(0) ? T(0) : x[i] * dy[i];
  return sum;
}

template <typename T>
void InputGradient(const T* x, T a, const T* dy, T* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > T(0) ? dy[i] : a * dy[i];
}

// inner = 1: the slopes vary along the row, so the loops run across it
// (one row of every sample after another), accumulating per channel.
template <typename T>
void BackwardRows(const PreluGeometry& g, const T* x, const T* a, const T* dy,
                  T* dx, T* da) {
  const int64_t c = g.channels;
  std::fill(da, da + c, T(0));
  for (int64_t o = 0; o < g.outer; ++o) {
    const T* xr = x + o * c;
    const T* gr = dy + o * c;
    for (int64_t i = 0; i < c; ++i) {
      da[i] += xr[i] > T(0) ? T(0) : xr[i] * gr[i];
    }
    if (dx == nullptr) continue;
    T* dr = dx + o * c;
    for (int64_t i = 0; i < c; ++i) dr[i] = xr[i] > T(0) ? gr[i] : a[i] * gr[i];
  }
}

}  // namespace

template <typename T>
void PreluForward(const PreluGeometry& g, const T* in, const T* slope, T* out) {
  if (g.inner == 1) {
    for (int64_t o = 0; o < g.outer; ++o) {
      ScaleRow(in + o * g.channels, slope, out + o * g.channels, g.channels);
    }
    return;
  }
  for (int64_t o = 0; o < g.outer; ++o) {
    for (int64_t c = 0; c < g.channels; ++c) {
      const int64_t at = (o * g.channels + c) * g.inner;
      Scale(in + at, slope[c], out + at, g.inner);
    }
  }
}

template <typename T>
void PreluBackward(const PreluGeometry& g, const T* in, const T* slope,
                   const T* grad_out, T* grad_in, T* grad_slope) {
  if (g.inner == 1) {
    BackwardRows(g, in, slope, grad_out, grad_in, grad_slope);
    return;
  }
  std::fill(grad_slope, grad_slope + g.channels, T(0));
  for (int64_t o = 0; o < g.outer; ++o) {
    for (int64_t c = 0; c < g.channels; ++c) {
      const int64_t at = (o * g.channels + c) * g.inner;
      grad_slope[c] += SlopeGradient(in + at, grad_out + at, g.inner);
      if (grad_in != nullptr) {
        InputGradient(in + at, slope[c], grad_out + at, grad_in + at, g.inner);
      }
    }
  }
}

#define COHORT_INSTANTIATE(T)                                                  \
  template void PreluForward<T>(const PreluGeometry&, const T*, const T*, T*); \
  template void PreluBackward<T>(const PreluGeometry&, const T*, const T*,     \
                                 const T*, T*, T*);
COHORT_INSTANTIATE(float)
COHORT_INSTANTIATE(double)
#undef COHORT_INSTANTIATE

}  // namespace cohort

#include "kernels/upsample.h"

#include <algorithm>
#include <vector>

namespace cohort {
namespace {

// The taps of every output index of one axis, as three arrays so that the
// loops over them vectorise.
template <typename T>
struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<T> w0, w1;
};

template <typename T>
Taps<T> AxisTaps(int64_t in, int64_t scale) {
  Taps<T> t;
  for (int64_t i = 0; i < in * scale; ++i) {
    const LinearTap<T> tap = BilinearTap<T>(i, in, scale);
    t.i0.push_back(tap.i0);
    t.i1.push_back(tap.i1);
    t.w0.push_back(T(1) - tap.w1);
    t.w1.push_back(tap.w1);
  }
  return t;
}

template <typename T>
void NearestForward(const UpsampleGeometry& g, const T* in, T* out) {
  const int64_t k = g.scale, out_w = g.in_w * k;
  for (int64_t r = 0; r < g.planes * g.in_h; ++r) {  // input rows
    const T* src = in + r * g.in_w;
    T* first = out + r * k * out_w;
    for (int64_t w = 0; w < g.in_w; ++w) {
      for (int64_t s = 0; s < k; ++s) first[w * k + s] = src[w];
    }
    for (int64_t s = 1; s < k; ++s) {
      std::copy(first, first + out_w, first + s * out_w);
    }
  }
}

template <typename T>
void NearestBackward(const UpsampleGeometry& g, const T* dy, T* dx) {
  const int64_t k = g.scale, out_w = g.in_w * k;
  for (int64_t r = 0; r < g.planes * g.in_h; ++r) {
    T* acc = dx + r * g.in_w;
    std::fill(acc, acc + g.in_w, T(0));
    for (int64_t s = 0; s < k; ++s) {
      const T* row = dy + (r * k + s) * out_w;
      for (int64_t w = 0; w < g.in_w; ++w) {
        T sum = 0;
        for (int64_t t = 0; t < k; ++t) sum += row[w * k + t];
        acc[w] += sum;
      }
    }
  }
}

// Each input row interpolated across (in_h x out_w in `rows`), then each
// output row a blend of two of those.
template <typename T>
void BilinearForward(const UpsampleGeometry& g, const T* in, T* out) {
  const int64_t out_h = g.in_h * g.scale, out_w = g.in_w * g.scale;
  const Taps<T> across = AxisTaps<T>(g.in_w, g.scale);
  const Taps<T> down = AxisTaps<T>(g.in_h, g.scale);
  std::vector<T> rows(g.in_h * out_w);
  for (int64_t p = 0; p < g.planes; ++p) {
    const T* src = in + p * g.in_h * g.in_w;
    for (int64_t h = 0; h < g.in_h; ++h) {
      const T* x = src + h * g.in_w;
      T* r = rows.data() + h * out_w;
      for (int64_t j = 0; j < out_w; ++j) {
        r[j] = across.w0[j] * x[across.i0[j]] + across.w1[j] * x[across.i1[j]];
      }
    }
    T* dst = out + p * out_h * out_w;
    for (int64_t i = 0; i < out_h; ++i) {
      const T* a = rows.data() + down.i0[i] * out_w;
      const T* b = rows.data() + down.i1[i] * out_w;
      const T wa = down.w0[i], wb = down.w1[i];
      T* o = dst + i * out_w;
      for (int64_t j = 0; j < out_w; ++j) o[j] = wa * a[j] + wb * b[j];
    }
  }
}

// The transpose of BilinearForward, its two passes in reverse order.
template <typename T>
void BilinearBackward(const UpsampleGeometry& g, const T* dy, T* dx) {
  const int64_t out_h = g.in_h * g.scale, out_w = g.in_w * g.scale;
  const Taps<T> across = AxisTaps<T>(g.in_w, g.scale);
  const Taps<T> down = AxisTaps<T>(g.in_h, g.scale);
  std::vector<T> rows(g.in_h * out_w);
  for (int64_t p = 0; p < g.planes; ++p) {
    std::fill(rows.begin(), rows.end(), T(0));
    const T* grad = dy + p * out_h * out_w;
    for (int64_t i = 0; i < out_h; ++i) {
      T* a = rows.data() + down.i0[i] * out_w;
      T* b = rows.data() + down.i1[i] * out_w;
      const T wa = down.w0[i], wb = down.w1[i];
      const T* d = grad + i * out_w;
      for (int64_t j = 0; j < out_w; ++j) a[j] += wa * d[j];
      for (int64_t j = 0; j < out_w; ++j) b[j] += wb * d[j];
    }
    T* dst = dx + p * g.in_h * g.in_w;
    std::fill(dst, dst + g.in_h * g.in_w, T(0));
    for (int64_t h = 0; h < g.in_h; ++h) {
      const T* r = rows.data() + h * out_w;
      T* x = dst + h * g.in_w;
      for (int64_t j = 0; j < out_w; ++j) {
        x[across.i0[j]] += across.w0[j] * r[j];
        x[across.i1[j]] += across.w1[j] * r[j];
      }
    }
  }
}

}  // namespace

template <typename T>
void UpsampleForward(UpsampleMode mode, const UpsampleGeometry& g, const T* in,
                     T* out) {
  if (mode == UpsampleMode::kNearest) {
    NearestForward(g, in, out);
  } else {
    BilinearForward(g, in, out);
  }
}

template <typename T>
void UpsampleBackward(UpsampleMode mode, const UpsampleGeometry& g,
                      const T* grad_out, T* grad_in) {
  if (mode == UpsampleMode::kNearest) {
    NearestBackward(g, grad_out, grad_in);
  } else {
    BilinearBackward(g, grad_out, grad_in);
  }
}

#define COHORT_INSTANTIATE(T)                                              \
  template void UpsampleForward<T>(UpsampleMode, const UpsampleGeometry&,  \
                                   const T*, T*);                          \
  template void UpsampleBackward<T>(UpsampleMode, const UpsampleGeometry&, \
                                    const T*, T*);
COHORT_INSTANTIATE(float)
COHORT_INSTANTIATE(double)
#undef COHORT_INSTANTIATE

}  // namespace cohort

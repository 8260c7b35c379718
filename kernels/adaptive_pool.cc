#include "kernels/adaptive_pool.h"

#include <algorithm>

namespace cohort {

template <typename T>
void AdaptiveAvgPool2dForward(const AdaptivePool2dGeometry& g, const T* in,
                              T* out) {
  const int64_t in_plane = g.in_h * g.in_w;
  for (int64_t p = 0; p < g.planes; ++p) {
    const T* src = in + p * in_plane;
    for (int64_t i = 0; i < g.out_h; ++i) {
      const int64_t h0 = AdaptiveBegin(i, g.in_h, g.out_h);
      const int64_t h1 = AdaptiveEnd(i, g.in_h, g.out_h);
      for (int64_t j = 0; j < g.out_w; ++j) {
        const int64_t w0 = AdaptiveBegin(j, g.in_w, g.out_w);
        const int64_t w1 = AdaptiveEnd(j, g.in_w, g.out_w);
        T sum = 0;
        for (int64_t h = h0; h < h1; ++h) {
          for (int64_t w = w0; w < w1; ++w) sum += src[h * g.in_w + w];
        }
        *out++ = sum / static_cast<T>((h1 - h0) * (w1 - w0));
      }
    }
  }
}

template <typename T>
void AdaptiveAvgPool2dBackward(const AdaptivePool2dGeometry& g,
                               const T* grad_out, T* grad_in) {
  const int64_t in_plane = g.in_h * g.in_w;
  std::fill(grad_in, grad_in + g.planes * in_plane, T(0));
  for (int64_t p = 0; p < g.planes; ++p) {
    T* dst = grad_in + p * in_plane;
    for (int64_t i = 0; i < g.out_h; ++i) {
      const int64_t h0 = AdaptiveBegin(i, g.in_h, g.out_h);
      const int64_t h1 = AdaptiveEnd(i, g.in_h, g.out_h);
      for (int64_t j = 0; j < g.out_w; ++j) {
        const int64_t w0 = AdaptiveBegin(j, g.in_w, g.out_w);
        const int64_t w1 = AdaptiveEnd(j, g.in_w, g.out_w);
        const T v = *grad_out++ / static_cast<T>((h1 - h0) * (w1 - w0));
        for (int64_t h = h0; h < h1; ++h) {
          for (int64_t w = w0; w < w1; ++w) dst[h * g.in_w + w] += v;
        }
      }
    }
  }
}

#define COHORT_INSTANTIATE(T)                                               \
  template void AdaptiveAvgPool2dForward<T>(const AdaptivePool2dGeometry&,  \
                                            const T*, T*);                  \
  template void AdaptiveAvgPool2dBackward<T>(const AdaptivePool2dGeometry&, \
                                             const T*, T*);
COHORT_INSTANTIATE(float)
COHORT_INSTANTIATE(double)
#undef COHORT_INSTANTIATE

}  // namespace cohort

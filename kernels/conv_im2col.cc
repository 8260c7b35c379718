// The patch-matrix (im2col) passes, which serve every geometry in float
// and double; declared in conv_internal.h.
#include <algorithm>
#include <cstring>

#include "kernels/conv_internal.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"

namespace cohort {
namespace conv_internal {
namespace {

// Input channels per range of Im2col and Col2im, which split over the
// compute team by input channel: each channel's rows of col and plane of
// grad_in belong to one range, so the split changes no result.
int64_t ChannelGrain(const ConvGeometry& g, int64_t taps) {
  return std::max<int64_t>(1, kElementwiseGrain / (taps * g.positions()));
}

// Channel c of Im2col.
template <typename T>
void Im2colChannel(const ConvGeometry& g, const T* in, int64_t c,
                   const std::vector<int64_t>& taps, T* col) {
  const int64_t oh = g.out_h(), ow = g.out_w(), np = g.positions();
  const int64_t count = static_cast<int64_t>(taps.size());
  for (int64_t t = 0; t < count; ++t) {
    const int64_t kh = taps[t] / g.kernel_w, kw = taps[t] % g.kernel_w;
    T* row = col + (c * count + t) * np;
    for (int64_t n = 0; n < g.batch; ++n) {
      for (int64_t y = 0; y < oh; ++y) {
        T* dst = row + (n * oh + y) * ow;
        const int64_t ih = y * g.row_stride() + kh * g.dilation - g.pad_h;
        if (ih < 0 || ih >= g.in_h) {
          std::memset(dst, 0, ow * sizeof(T));
          continue;
        }
        const T* src = in + ((c * g.batch + n) * g.in_h + ih) * g.in_w;
        for (int64_t x = 0; x < ow; ++x) {
          const int64_t iw = x * g.stride + kw * g.dilation - g.pad_w;
          dst[x] = (iw >= 0 && iw < g.in_w) ? src[iw] : T(0);
        }
      }
    }
  }
}

// Channel c of Col2im.
template <typename T>
void Col2imChannel(const ConvGeometry& g, const T* col, int64_t c,
                   const std::vector<int64_t>& taps, T* grad_in) {
  const int64_t oh = g.out_h(), ow = g.out_w(), np = g.positions();
  const int64_t plane = g.batch * g.in_h * g.in_w;
  const int64_t count = static_cast<int64_t>(taps.size());
  std::memset(grad_in + c * plane, 0, plane * sizeof(T));
  for (int64_t t = 0; t < count; ++t) {
    const int64_t kh = taps[t] / g.kernel_w, kw = taps[t] % g.kernel_w;
    const T* row = col + (c * count + t) * np;
    for (int64_t n = 0; n < g.batch; ++n) {
      for (int64_t y = 0; y < oh; ++y) {
        const int64_t ih = y * g.row_stride() + kh * g.dilation - g.pad_h;
        if (ih < 0 || ih >= g.in_h) continue;
        const T* src = row + (n * oh + y) * ow;
        T* dst = grad_in + ((c * g.batch + n) * g.in_h + ih) * g.in_w;
        for (int64_t x = 0; x < ow; ++x) {
          const int64_t iw = x * g.stride + kw * g.dilation - g.pad_w;
          if (iw >= 0 && iw < g.in_w) dst[iw] += src[x];
        }
      }
    }
  }
}

}  // namespace

std::vector<int64_t> AllTaps(const ConvGeometry& g) {
  std::vector<int64_t> taps(g.kernel_h * g.kernel_w);
  for (size_t t = 0; t < taps.size(); ++t) taps[t] = static_cast<int64_t>(t);
  return taps;
}

template <typename T>
void Im2col(const ConvGeometry& g, const T* in,
            const std::vector<int64_t>& taps, T* col) {
  ParallelItems(g.in_channels, ChannelGrain(g, taps.size()),
                [&](int64_t begin, int64_t end) {
                  for (int64_t c = begin; c < end; ++c)
                    Im2colChannel(g, in, c, taps, col);
                });
}

template <typename T>
void Col2im(const ConvGeometry& g, const T* col,
            const std::vector<int64_t>& taps, T* grad_in) {
  ParallelItems(g.in_channels, ChannelGrain(g, taps.size()),
                [&](int64_t begin, int64_t end) {
                  for (int64_t c = begin; c < end; ++c)
                    Col2imChannel(g, col, c, taps, grad_in);
                });
}

template <typename T>
void Im2colForward(const ConvGeometry& g, const T* in, const T* weight,
                   const T* bias, T* out, ConvWorkspace<T>* ws) {
  const int64_t kk = g.patch(), np = g.positions();
  EnsureSize(&ws->col, kk * np);
  Im2col(g, in, AllTaps(g), ws->col.data());
  if (bias != nullptr) BroadcastColumn<T>(g.out_channels, np, bias, out, np);
  Gemm<T>(Trans::kNo, Trans::kNo, g.out_channels, np, kk, T(1), weight, kk,
          ws->col.data(), np, bias != nullptr ? T(1) : T(0), out, np);
}

// grad_in = col2im(W^T grad_out).
template <typename T>
void Im2colBackwardInput(const ConvGeometry& g, const T* grad_out,
                         const T* weight, T* grad_in, ConvWorkspace<T>* ws) {
  const int64_t kk = g.patch(), np = g.positions();
  EnsureSize(&ws->grad_col, kk * np);
  Gemm<T>(Trans::kYes, Trans::kNo, kk, np, g.out_channels, T(1), weight, kk,
          grad_out, np, T(0), ws->grad_col.data(), np);
  Col2im(g, ws->grad_col.data(), AllTaps(g), grad_in);
}

template void Im2col<float>(const ConvGeometry&, const float*,
                            const std::vector<int64_t>&, float*);
template void Im2col<double>(const ConvGeometry&, const double*,
                             const std::vector<int64_t>&, double*);
template void Col2im<float>(const ConvGeometry&, const float*,
                            const std::vector<int64_t>&, float*);
template void Col2im<double>(const ConvGeometry&, const double*,
                             const std::vector<int64_t>&, double*);

template void Im2colForward<float>(const ConvGeometry&, const float*,
                                   const float*, const float*, float*,
                                   ConvWorkspace<float>*);
template void Im2colForward<double>(const ConvGeometry&, const double*,
                                    const double*, const double*, double*,
                                    ConvWorkspace<double>*);
template void Im2colBackwardInput<float>(const ConvGeometry&, const float*,
                                         const float*, float*,
                                         ConvWorkspace<float>*);
template void Im2colBackwardInput<double>(const ConvGeometry&, const double*,
                                          const double*, double*,
                                          ConvWorkspace<double>*);

}  // namespace conv_internal
}  // namespace cohort

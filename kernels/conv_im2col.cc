// The patch-matrix (im2col) passes, which serve every geometry in float
// and double, and the tiny-image passes built on them for channel-blocked
// layers; declared in conv_internal.h.
#include <algorithm>
#include <cstring>

#include "kernels/channel_blocked.h"
#include "kernels/conv_internal.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"

namespace cohort {
namespace conv_internal {
namespace {

// Input channels per range of Im2col and Col2im, which split over the
// compute team by input channel: each channel's rows of col and plane of
// grad_in belong to one range, so the split changes no result.
int64_t ChannelGrain(const ConvGeometry& g) {
  return std::max<int64_t>(
      1, kElementwiseGrain / (g.kernel_h * g.kernel_w * g.positions()));
}

// Channel c of Im2col.
template <typename T>
void Im2colChannel(const ConvGeometry& g, const T* in, int64_t c, T* col) {
  const int64_t oh = g.out_h(), ow = g.out_w(), np = g.positions();
  for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
    for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
      T* row = col + ((c * g.kernel_h + kh) * g.kernel_w + kw) * np;
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
}

// Channel c of Col2im.
template <typename T>
void Col2imChannel(const ConvGeometry& g, const T* col, int64_t c, T* grad_in) {
  const int64_t oh = g.out_h(), ow = g.out_w(), np = g.positions();
  const int64_t plane = g.batch * g.in_h * g.in_w;
  std::memset(grad_in + c * plane, 0, plane * sizeof(T));
  for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
    for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
      const T* row = col + ((c * g.kernel_h + kh) * g.kernel_w + kw) * np;
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
}

// col[(c, kh, kw)][n][oh][ow] = in[c][n][oh*s + kh - ph][ow*s + kw - pw].
template <typename T>
void Im2col(const ConvGeometry& g, const T* in, T* col) {
  ParallelItems(g.in_channels, ChannelGrain(g),
                [&](int64_t begin, int64_t end) {
                  for (int64_t c = begin; c < end; ++c)
                    Im2colChannel(g, in, c, col);
                });
}

// The adjoint of Im2col: grad_in (zeroed here) += scattered grad_col.
template <typename T>
void Col2im(const ConvGeometry& g, const T* col, T* grad_in) {
  ParallelItems(g.in_channels, ChannelGrain(g),
                [&](int64_t begin, int64_t end) {
                  for (int64_t c = begin; c < end; ++c)
                    Col2imChannel(g, col, c, grad_in);
                });
}

// `x` on the batch-inner layout: itself, or converted into `plain` when
// the workspace's activations are channel-blocked.
const float* BatchInner(const float* x, int64_t channels, int64_t batch,
                        int64_t positions, const ConvWorkspace<float>& ws,
                        BasicTensor<float>* plain) {
  if (ws.channel_block == 0) return x;
  EnsureSize(plain, channels * batch * positions);
  FromChannelBlocked(x, channels, batch, positions, ws.channel_block,
                     plain->data());
  return plain->data();
}

}  // namespace

template <typename T>
void Im2colForward(const ConvGeometry& g, const T* in, const T* weight,
                   const T* bias, T* out, ConvWorkspace<T>* ws) {
  const int64_t kk = g.patch(), np = g.positions();
  EnsureSize(&ws->col, kk * np);
  Im2col(g, in, ws->col.data());
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
  Col2im(g, ws->grad_col.data(), grad_in);
}

// Images of at most 4 output positions (ResNet-18's last stages on 32x32
// inputs, 2x2 and 1x1), where the weights outweigh the activations: oneDNN
// converts the weights to its layout and back on every pass, and its
// weight-gradient kernels ran these shapes at a tenth of its forward speed
// (AVX-512, batch 32, 512-512 3x3 at 1x1: 10.6 ms against 0.9 ms forward,
// and about 4 ms for each conversion of the 9 MB of weights). One product
// over the patch matrix per pass, on the weights as they are, takes about a
// millisecond. Only where oneDNN would run; `g` is one group's geometry.
bool TinyImagePays(const ConvGeometry& g, const ConvWorkspace<float>& ws) {
  return ws.algorithm == ConvAlgorithm::kAuto && g.out_h() * g.out_w() <= 4;
}

// Im2colForward on batch-inner activations; col stays in the workspace for
// the weight gradient.
void TinyImageForward(const ConvGeometry& g, const float* in,
                      const float* weight, const float* bias, float* out,
                      ConvWorkspace<float>* ws) {
  const float* x =
      BatchInner(in, g.in_channels, g.batch, g.in_h * g.in_w, *ws, &ws->padded);
  if (ws->channel_block == 0) {
    Im2colForward<float>(g, x, weight, bias, out, ws);
    return;
  }
  const int64_t np = g.positions();
  EnsureSize(&ws->scratch, g.out_channels * np);
  Im2colForward<float>(g, x, weight, bias, ws->scratch.data(), ws);
  ToChannelBlocked(ws->scratch.data(), g.out_channels, g.batch, np / g.batch,
                   ws->channel_block, out);
}

// grad_weight = dy col^T and grad_bias = dy's row sums.
void TinyImageWeightGrad(const ConvGeometry& g, const float* grad_out,
                         float* grad_weight, float* grad_bias,
                         ConvWorkspace<float>* ws) {
  const int64_t kk = g.patch(), np = g.positions();
  const float* dy = BatchInner(grad_out, g.out_channels, g.batch, np / g.batch,
                               *ws, &ws->grad_padded);
  Gemm<float>(Trans::kNo, Trans::kYes, g.out_channels, kk, np, 1.0f, dy, np,
              ws->col.data(), np, 0.0f, grad_weight, kk);
  if (grad_bias != nullptr) {
    RowSums<float>(g.out_channels, np, dy, np, grad_bias);
  }
}

// Im2colBackwardInput on batch-inner activations.
void TinyImageBackwardInput(const ConvGeometry& g, const float* grad_out,
                            const float* weight, float* grad_in,
                            ConvWorkspace<float>* ws) {
  const int64_t out_positions = g.out_h() * g.out_w();
  const float* dy = BatchInner(grad_out, g.out_channels, g.batch, out_positions,
                               *ws, &ws->grad_padded);
  if (ws->channel_block == 0) {
    Im2colBackwardInput<float>(g, dy, weight, grad_in, ws);
    return;
  }
  const int64_t in_positions = g.in_h * g.in_w;
  EnsureSize(&ws->scratch, g.in_channels * g.batch * in_positions);
  Im2colBackwardInput<float>(g, dy, weight, ws->scratch.data(), ws);
  ToChannelBlocked(ws->scratch.data(), g.in_channels, g.batch, in_positions,
                   ws->channel_block, grad_in);
}

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

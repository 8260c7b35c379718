// Convolutions over images of at most 4 output positions (ResNet-18's last
// stages on 32x32 inputs, 2x2 and 1x1), where the weights outweigh the
// activations: one product over the patch matrix per pass, on the weights as
// they are, instead of oneDNN; declared in conv_internal.h.
//
// On maps this small, some kernel taps may read nothing but padding at
// every output position: a 3x3 kernel with padding 1 on a 1x1 map reads the
// image through its centre tap only. Those taps add exact zeros, so the
// passes leave them out. The patch matrix then holds the live taps' rows
// only, the weights of those taps are gathered into a matrix of their own,
// and the weight gradient of every other tap is zero.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/backward_helper.h"
#include "kernels/channel_blocked.h"
#include "kernels/conv_internal.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"

namespace cohort {
namespace conv_internal {
namespace {

// Whether offset `k` of an axis (kernel index times dilation, less the
// padding before) reads a pixel inside [0, size) for some output index
// below `outputs` at `stride`.
bool AxisTapLive(int64_t k, int64_t outputs, int64_t stride, int64_t size) {
  for (int64_t o = 0; o < outputs; ++o) {
    const int64_t i = o * stride + k;
    if (i >= 0 && i < size) return true;
  }
  return false;
}

// The taps that read the image at some output position, in order. A tap
// is live when both its row and its column are, so the set is a product.
std::vector<int64_t> LiveTaps(const ConvGeometry& g) {
  std::vector<int64_t> taps;
  for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
    if (!AxisTapLive(kh * g.dilation - g.pad_h, g.out_h(), g.row_stride(),
                     g.in_h)) {
      continue;
    }
    for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
      if (AxisTapLive(kw * g.dilation - g.pad_w, g.out_w(), g.stride, g.in_w)) {
        taps.push_back(kh * g.kernel_w + kw);
      }
    }
  }
  return taps;
}

// Rows (output channel, input channel) of the weights per range.
int64_t RowGrain(int64_t taps) {
  return std::max<int64_t>(1, kElementwiseGrain / taps);
}

// live[(oc, c)][t] = weight[(oc, c)][taps[t]].
void GatherTaps(const ConvGeometry& g, const std::vector<int64_t>& taps,
                const float* weight, float* live) {
  const int64_t all = g.kernel_h * g.kernel_w;
  const int64_t count = static_cast<int64_t>(taps.size());
  ParallelItems(g.out_channels * g.in_channels, RowGrain(all),
                [&](int64_t begin, int64_t end) {
                  for (int64_t r = begin; r < end; ++r) {
                    for (int64_t t = 0; t < count; ++t) {
                      live[r * count + t] = weight[r * all + taps[t]];
                    }
                  }
                });
}

// grad_weight[(oc, c)][taps[t]] = live[(oc, c)][t], and 0 at the others.
// Zeroed and filled a block of rows at a time, so that the fill finds the
// zeroed lines still in the first-level cache.
void ScatterTaps(const ConvGeometry& g, const std::vector<int64_t>& taps,
                 const float* live, float* grad_weight) {
  constexpr int64_t kBlockRows = 256;
  const int64_t all = g.kernel_h * g.kernel_w;
  const int64_t count = static_cast<int64_t>(taps.size());
  ParallelItems(g.out_channels * g.in_channels, RowGrain(all),
                [&](int64_t begin, int64_t end) {
                  for (int64_t b = begin; b < end; b += kBlockRows) {
                    const int64_t e = std::min(end, b + kBlockRows);
                    std::memset(grad_weight + b * all, 0,
                                (e - b) * all * sizeof(float));
                    for (int64_t r = b; r < e; ++r) {
                      for (int64_t t = 0; t < count; ++t) {
                        grad_weight[r * all + taps[t]] = live[r * count + t];
                      }
                    }
                  }
                });
}

// out = W col(in) + bias over the live taps; col stays in ws->col for the
// weight gradient. On batch-inner activations.
void LiveTapsForward(const ConvGeometry& g, const float* in,
                     const float* weight, const float* bias, float* out,
                     ConvWorkspace<float>* ws) {
  const std::vector<int64_t> taps = LiveTaps(g);
  if (taps.size() == static_cast<size_t>(g.kernel_h * g.kernel_w)) {
    Im2colForward<float>(g, in, weight, bias, out, ws);
    return;
  }
  const int64_t kk = g.in_channels * taps.size(), np = g.positions();
  EnsureSize(&ws->col, kk * np);
  Im2col(g, in, taps, ws->col.data());
  EnsureSize(&ws->tap_weights, g.out_channels * kk);
  GatherTaps(g, taps, weight, ws->tap_weights.data());
  ws->tap_weights_forward = true;
  if (bias != nullptr)
    BroadcastColumn<float>(g.out_channels, np, bias, out, np);
  Gemm<float>(Trans::kNo, Trans::kNo, g.out_channels, np, kk, 1.0f,
              ws->tap_weights.data(), kk, ws->col.data(), np,
              bias != nullptr ? 1.0f : 0.0f, out, np);
}

// grad_in = col2im(W^T dy) over the live taps, on batch-inner activations.
void LiveTapsBackwardInput(const ConvGeometry& g, const float* dy,
                           const float* weight, float* grad_in,
                           ConvWorkspace<float>* ws) {
  const std::vector<int64_t> taps = LiveTaps(g);
  if (taps.size() == static_cast<size_t>(g.kernel_h * g.kernel_w)) {
    Im2colBackwardInput<float>(g, dy, weight, grad_in, ws);
    return;
  }
  const int64_t kk = g.in_channels * taps.size(), np = g.positions();
  // Kept from the forward pass only when the caller says the weights did
  // not change since: the gather reads every line of the weights, which at
  // a 512-512 3x3 layer's 9.4 MB costs as much as the product.
  if (!(ws->weights_as_in_forward && ws->tap_weights_forward)) {
    EnsureSize(&ws->tap_weights, g.out_channels * kk);
    GatherTaps(g, taps, weight, ws->tap_weights.data());
    ws->tap_weights_forward = false;
  }
  EnsureSize(&ws->grad_col, kk * np);
  Gemm<float>(Trans::kYes, Trans::kNo, kk, np, g.out_channels, 1.0f,
              ws->tap_weights.data(), kk, dy, np, 0.0f, ws->grad_col.data(),
              np);
  Col2im(g, ws->grad_col.data(), taps, grad_in);
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

// oneDNN converts the weights to its layout and back on every pass, and its
// weight-gradient kernels ran these shapes at a tenth of its forward speed
// (AVX-512, batch 32, 512-512 3x3 at 1x1: 10.6 ms against 0.9 ms forward,
// and about 4 ms for each conversion of the 9 MB of weights). One product
// over the patch matrix per pass takes about a millisecond. Only where
// oneDNN would run; `g` is one group's geometry.
bool TinyImagePays(const ConvGeometry& g, const ConvWorkspace<float>& ws) {
  return ws.algorithm == ConvAlgorithm::kAuto && g.out_h() * g.out_w() <= 4;
}

// oneDNN's AVX-512 kernels against these products where no tap reads only
// padding (nothing to leave out), nChw16c, batch 32, one thread
// (kernels:conv_bench, "nChw16c onednn" against "auto"): 256-256 3x3 on
// 2x2 maps, forward 0.95 against 1.33 ms and input gradient 0.88 against
// 1.14; 128-256 3x3 stride 2 from 4x4 to 2x2, forward 0.61 against 0.73,
// but input gradient 1.07 against 0.72 (oneDNN's strided input gradient).
// With dead taps the products win every pass (512-512 at 1x1: forward 1.60
// against 0.65). On AVX2 the products win (TinyImageWideChannels).
bool TinyImageOnednnTakes(const ConvGeometry& g, const ConvWorkspace<float>& ws,
                          TinyPass pass) {
  if (ws.channel_block != 16 ||
      LiveTaps(g).size() != static_cast<size_t>(g.kernel_h * g.kernel_w)) {
    return false;
  }
  return pass == TinyPass::kForward || g.stride == 1;
}

void TinyImageForward(const ConvGeometry& g, const float* in,
                      const float* weight, const float* bias, float* out,
                      ConvWorkspace<float>* ws) {
  ws->col_of_input = true;  // by the end of this pass
  const float* x =
      BatchInner(in, g.in_channels, g.batch, g.in_h * g.in_w, *ws, &ws->padded);
  if (ws->channel_block == 0) {
    LiveTapsForward(g, x, weight, bias, out, ws);
    return;
  }
  const int64_t np = g.positions();
  EnsureSize(&ws->scratch, g.out_channels * np);
  LiveTapsForward(g, x, weight, bias, ws->scratch.data(), ws);
  ToChannelBlocked(ws->scratch.data(), g.out_channels, g.batch, np / g.batch,
                   ws->channel_block, out);
}

namespace {

// ws->col from ws->input, where the forward pass ran on oneDNN.
void PatchMatrixOfInput(const ConvGeometry& g, const std::vector<int64_t>& taps,
                        ConvWorkspace<float>* ws) {
  const float* x = BatchInner(ws->input, g.in_channels, g.batch,
                              g.in_h * g.in_w, *ws, &ws->padded);
  EnsureSize(&ws->col, g.in_channels * taps.size() * g.positions());
  Im2col(g, x, taps, ws->col.data());
  ws->col_of_input = true;
}

// grad_weight = dy col^T over the live taps (zero at the others) and
// grad_bias = dy's row sums, `dy` on the batch-inner layout.
void LiveTapsWeightGrad(const ConvGeometry& g, const float* dy,
                        float* grad_weight, float* grad_bias,
                        ConvWorkspace<float>* ws) {
  const std::vector<int64_t> taps = LiveTaps(g);
  const bool all = taps.size() == static_cast<size_t>(g.kernel_h * g.kernel_w);
  const int64_t kk = g.in_channels * taps.size(), np = g.positions();
  if (!ws->col_of_input) PatchMatrixOfInput(g, taps, ws);
  float* live = grad_weight;
  if (!all) {
    EnsureSize(&ws->tap_grads, g.out_channels * kk);
    live = ws->tap_grads.data();
  }
  Gemm<float>(Trans::kNo, Trans::kYes, g.out_channels, kk, np, 1.0f, dy, np,
              ws->col.data(), np, 0.0f, live, kk);
  if (!all) ScatterTaps(g, taps, live, grad_weight);
  if (grad_bias != nullptr) {
    RowSums<float>(g.out_channels, np, dy, np, grad_bias);
  }
}

// The input gradient from `dy` on the batch-inner layout, into grad_in on
// the workspace's layout.
void InputGradFromBatchInner(const ConvGeometry& g, const float* dy,
                             const float* weight, float* grad_in,
                             ConvWorkspace<float>* ws) {
  if (ws->channel_block == 0) {
    LiveTapsBackwardInput(g, dy, weight, grad_in, ws);
    return;
  }
  const int64_t in_positions = g.in_h * g.in_w;
  EnsureSize(&ws->scratch, g.in_channels * g.batch * in_positions);
  LiveTapsBackwardInput(g, dy, weight, ws->scratch.data(), ws);
  ToChannelBlocked(ws->scratch.data(), g.in_channels, g.batch, in_positions,
                   ws->channel_block, grad_in);
}

// grad_out on the batch-inner layout.
const float* BatchInnerGradOut(const ConvGeometry& g, const float* grad_out,
                               ConvWorkspace<float>* ws) {
  return BatchInner(grad_out, g.out_channels, g.batch, g.out_h() * g.out_w(),
                    *ws, &ws->grad_padded);
}

}  // namespace

void TinyImageWeightGrad(const ConvGeometry& g, const float* grad_out,
                         float* grad_weight, float* grad_bias,
                         ConvWorkspace<float>* ws) {
  LiveTapsWeightGrad(g, BatchInnerGradOut(g, grad_out, ws), grad_weight,
                     grad_bias, ws);
}

void TinyImageBackwardInput(const ConvGeometry& g, const float* grad_out,
                            const float* weight, float* grad_in,
                            ConvWorkspace<float>* ws) {
  InputGradFromBatchInner(g, BatchInnerGradOut(g, grad_out, ws), weight,
                          grad_in, ws);
}

void TinyImageBackwardHanded(const ConvGeometry& g, const float* grad_out,
                             const float* weight, float* grad_weight,
                             float* grad_bias, float* grad_in,
                             ConvWorkspace<float>* ws, BackwardHelper& helper) {
  // Converted once for both passes; the helper then touches only the
  // weight gradient's buffers (tap_grads) and the forward's patch matrix.
  const float* dy = BatchInnerGradOut(g, grad_out, ws);
  helper.Push([=] { LiveTapsWeightGrad(g, dy, grad_weight, grad_bias, ws); });
  if (grad_in != nullptr) InputGradFromBatchInner(g, dy, weight, grad_in, ws);
}

}  // namespace conv_internal
}  // namespace cohort

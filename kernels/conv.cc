#include "kernels/conv.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "common/logging.h"
#include "kernels/backward_helper.h"
#include "kernels/channel_blocked.h"
#include "kernels/conv_depthwise.h"
#include "kernels/conv_internal.h"
#include "kernels/conv_onednn.h"
#include "kernels/conv_winograd.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"

namespace cohort {
namespace {

using conv_internal::Im2colBackwardInput;
using conv_internal::Im2colForward;
using conv_internal::TinyImageBackwardHanded;
using conv_internal::TinyImageBackwardInput;
using conv_internal::TinyImageForward;
using conv_internal::TinyImageOnednnTakes;
using conv_internal::TinyImagePays;
using conv_internal::TinyImageWeightGrad;
using conv_internal::TinyPass;

// A stride-1 convolution over images of at most 4x4 outputs with 256
// channels a side or more (ResNet's last stage on 32x32 inputs), where
// oneDNN's AVX2 kernels run at a third of this core's peak: one im2col
// product per pass takes about half their time (conv_bench, AVX2, batch 32,
// all three passes: 4x4 512-512 121 against 237 ms; 8x8 256-256 a tie).
// (The grid kernels were not measured at these shapes.) Where oneDNN runs
// AVX-512 code the choice stays oneDNN's, which was not measured losing
// there.
bool TinyImageWideChannels(const ConvGeometry& g) {
  return NativeChannelBlock() == 8 && g.stride == 1 && g.dilation == 1 &&
         g.uniform() && g.out_h() * g.out_w() <= 16 &&
         std::min(g.in_channels, g.out_channels) >= 256;
}

using conv_internal::GridConv;

template <typename T>
bool UseGrid(const ConvGeometry& g, const ConvWorkspace<T>& ws) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    if (ws.algorithm == ConvAlgorithm::kAuto && TinyImageWideChannels(g)) {
      return false;
    }
    return ws.algorithm != ConvAlgorithm::kIm2col && g.stride == 1 &&
           g.dilation == 1 && g.uniform();
  }
}

// A 1-D convolution (one input row, one kernel row) has one output row;
// the grid kernels then pad virtually instead of copying the input.
bool OneRow(const ConvGeometry& g) {
  return g.in_h == 1 && g.kernel_h == 1 && g.pad_h == 0;
}

// The grid convolution over the input as ConvForward passes it: padded in
// memory unless OneRow.
GridConv ForwardGrid(const ConvGeometry& g) {
  if (OneRow(g)) {
    return {g.in_channels,  g.batch,    1,          g.in_w,
            g.out_channels, g.kernel_h, g.kernel_w, g.pad_w};
  }
  return {
      g.in_channels,  g.batch,    g.in_h + 2 * g.pad_h, g.in_w + 2 * g.pad_w,
      g.out_channels, g.kernel_h, g.kernel_w,           0};
}

// The input gradient of a stride-1 convolution as a convolution of the
// output gradient padded by K-1-pad: channels and out_channels swap.
GridConv InputGradGrid(const ConvGeometry& g) {
  if (OneRow(g)) {
    return {g.out_channels, g.batch,    1,          g.out_w(),
            g.in_channels,  g.kernel_h, g.kernel_w, g.kernel_w - 1 - g.pad_w};
  }
  return {g.out_channels,
          g.batch,
          g.out_h() + 2 * (g.kernel_h - 1 - g.pad_h),
          g.out_w() + 2 * (g.kernel_w - 1 - g.pad_w),
          g.in_channels,
          g.kernel_h,
          g.kernel_w,
          0};
}

// Copies `planes` planes of h x w into planes of (h+2ph) x (w+2pw) with a
// zero border, writing every element (the buffer is reused across shapes).
template <typename T>
void PadPlanes(const T* in, int64_t planes, int64_t h, int64_t w, int64_t ph,
               int64_t pw, T* out) {
  const int64_t wp = w + 2 * pw;
  for (int64_t p = 0; p < planes; ++p) {
    const T* src = in + p * h * w;
    T* dst = out + p * (h + 2 * ph) * wp;
    std::memset(dst, 0, (ph * wp + pw) * sizeof(T));
    dst += ph * wp + pw;
    for (int64_t r = 0; r < h; ++r) {
      std::memcpy(dst, src + r * w, w * sizeof(T));
      // Right border of this row and left border of the next one; after
      // the last row only its own, since without bottom rows (ph = 0, a
      // 1 x K kernel's padding) the next one would be past the plane.
      std::memset(dst + w, 0, (r + 1 < h ? 2 : 1) * pw * sizeof(T));
      dst += wp;
    }
    std::memset(dst - pw, 0, ph * wp * sizeof(T));  // the bottom border rows
  }
}

// Multiply-adds of the two stride-1 input-gradient kernels. The grid one
// convolves the whole padded output gradient, zeros included; the column
// one multiplies only real gradients but pays col2im, modelled as
// kCol2imCost multiply-adds per dcol element (conv_bench, cifar conv2:
// about 0.2 ns per element against 0.024 ns per multiply-add).
constexpr double kCol2imCost = 8.0;

bool UseGridInputGrad(const ConvGeometry& g, ConvAlgorithm algorithm) {
  if (g.pad_h >= g.kernel_h || g.pad_w >= g.kernel_w) return false;
  if (algorithm == ConvAlgorithm::kGrid) return true;
  if (algorithm == ConvAlgorithm::kChannels) return false;
  const GridConv grid = InputGradGrid(g);
  const double grid_macs = static_cast<double>(grid.out_channels) *
                           grid.patch() * grid.batch * grid.span();
  const double column_macs = static_cast<double>(g.patch()) * g.positions() *
                             (g.out_channels + kCol2imCost);
  return grid_macs <= column_macs;
}

// Multiply-adds of the position- and channel-vectorized kernels on `grid`:
// the former computes whole tiles of grid positions, the latter pads the
// channels to 16 and pays about 10% for transposing.
bool UseChannels(const GridConv& grid, ConvAlgorithm algorithm) {
  if (grid.pad_w != 0) return false;  // one-row grids waste nothing
  if (algorithm == ConvAlgorithm::kGrid) return false;
  if (algorithm == ConvAlgorithm::kChannels) return true;
  const double per_tap = static_cast<double>(grid.patch()) * grid.batch;
  const double grid_macs =
      per_tap * grid.out_channels * ((grid.span() + 15) / 16 * 16);
  const double channel_macs = 1.1 * per_tap *
                              ((grid.out_channels + 15) / 16 * 16) *
                              grid.out_h() * grid.out_w();
  return channel_macs < grid_macs;
}

void GridInputGrad(const ConvGeometry& g, const float* grad_out,
                   const float* weight, float* grad_in,
                   ConvWorkspace<float>* ws) {
  const GridConv grid = InputGradGrid(g);
  const float* dy = grad_out;
  if (!OneRow(g)) {
    conv_internal::EnsureSize(&ws->grad_padded, grid.channels * grid.batch *
                                                    grid.height * grid.width);
    PadPlanes(grad_out, g.out_channels * g.batch, g.out_h(), g.out_w(),
              g.kernel_h - 1 - g.pad_h, g.kernel_w - 1 - g.pad_w,
              ws->grad_padded.data());
    dy = ws->grad_padded.data();
  }
  conv_internal::PackWeights(grid, weight, /*flip=*/true, &ws->packed);
  conv_internal::GridForward(grid, dy, ws->packed, nullptr, grad_in,
                             &ws->scratch, &ws->offsets);
}

// A 1x1 convolution with stride 1 and no padding is one matrix product on
// the batch-inner layout (out[OC][N*P] = W[OC][C] in[C][N*P]): no im2col
// copy, no grid scratch.
bool Pointwise(const ConvGeometry& g) {
  return g.kernel_h == 1 && g.kernel_w == 1 && g.stride == 1 && g.pad_h == 0 &&
         g.pad_w == 0 && g.uniform();
}

// Where oneDNN's channel-blocked kernels win, measured as the time of all
// three passes at one thread on an AVX-512 core (conv_bench's ResNet shapes
// and a sweep of 3-64 channels; oneDNN's time over the alternative's):
//  - where only im2col applies (stride > 1, dilation, SAME padding): 0.4-0.6
//    from 16 output channels up (3-16 3x3 s2 0.56, ResNet-50's stem 0.64);
//  - 1x1 stride 1 (one GEMM otherwise): 0.65-0.9 from 64 channels a side,
//    but 1.3-1.4 at 16-32, where the reorders cost more than they save;
//  - the stride-1 direct kernels: 0.5-0.66 from 32 channels a side; at 16
//    only for images whose channels fill oneDNN's blocks of 16 (16-16 at
//    32x32 0.63, 24-24 0.97, 1-D 16-32 0.97-1.25, 6-16 5x5 1.2).
}  // namespace

bool OnednnWins(const ConvGeometry& g) {
  const int64_t narrow = std::min(g.in_channels, g.out_channels);
  if (Pointwise(g)) return narrow >= 64;
  if (TinyImageWideChannels(g)) return false;
  if (g.stride != 1 || g.dilation != 1 || !g.uniform()) {
    return g.out_channels >= 16;
  }
  if (narrow >= 32) return true;
  return narrow >= 16 && g.in_h > 1 && g.in_channels % 16 == 0 &&
         g.out_channels % 16 == 0;
}

namespace {

// Whether oneDNN runs every pass of this (groups = 1) float convolution;
// always for channel-blocked activations, which only oneDNN reads.
template <typename T>
bool UseOnednn(const ConvGeometry& g, const ConvWorkspace<T>& ws) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    if (ws.channel_block != 0) {
      CHECK(g.groups == 1) << "channel-blocked activations need groups = 1";
      return true;
    }
    if (ws.algorithm == ConvAlgorithm::kOnednn) return true;
    return ws.algorithm == ConvAlgorithm::kAuto && OnednnWins(g);
  }
}

// Whether the Winograd kernels run every pass: channel-blocked float
// activations where they apply, unless another algorithm is forced.
template <typename T>
bool UseWinograd(const ConvGeometry& g, const ConvWorkspace<T>& ws) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    return (ws.algorithm == ConvAlgorithm::kAuto ||
            ws.algorithm == ConvAlgorithm::kWinograd) &&
           conv_internal::WinogradApplies(g, ws.channel_block);
  }
}

// oneDNN's Winograd against its direct kernels on nChw16c, all three passes
// at one thread on an AVX-512 core (conv_bench, "nChw16c"): 0.45-0.54 of
// the time from 16x16 to 56x56 images (ResNet-18 at batch 32, ResNet-50 at
// batch 8), 0.59-0.71 at 8x8 and 14x14, but 1.09-1.34 with 32 tiles of 4x4
// outputs (4x4 at batch 32, 7x7 at batch 8) and 2-6 with 16 or 4 (batch 1
// at 14x14 and 7x7), where transforming the weights (36 values per kernel)
// outweighs the multiplications saved. The weight gradient alone pays from
// 32 tiles where the images are whole tiles (0.59-0.84 at 4x4 and 8x8 with
// 256-512 channels), not at 7x7 or 14x14 (1.33 and 0.98).
//
// Evaluation runs F(2x2, 3x3) with its weights transformed once and kept
// while they do not change (conv_onednn.h), frozen or not, so `cohort
// predict` gives the bits of the evaluation during training. Its time over
// direct ("eval"): 0.39-0.92 frozen on every ResNet layer from 4x4 at batch
// 1 up, 0.47-1.10 not frozen (the check of the weights costs what direct
// pays to fold them; 1.03-1.10 at batch 1 on 7x7 and 14x14). But oneDNN's
// transform of the weights is slow (3, 13 and 55 ms at one thread for
// 128, 256 and 512 channels), and a layer must run about 1000 / tiles
// times to earn it back: from 48 tiles of 2x2 outputs (14x14 at batch 1,
// 7x7 at batch 3), a few dozen calls.
enum class OnednnPass { kTraining, kWeightGrad, kEvaluation };

constexpr int64_t kEvalWinogradTiles = 48;

bool OnednnWinogradPays(const ConvGeometry& g, OnednnPass pass) {
  if (pass == OnednnPass::kEvaluation) {
    const int64_t tiles =
        g.batch * ((g.out_h() + 1) / 2) * ((g.out_w() + 1) / 2);
    return tiles >= kEvalWinogradTiles;
  }
  const int64_t tiles = g.batch * ((g.out_h() + 3) / 4) * ((g.out_w() + 3) / 4);
  const bool whole_tiles = g.out_h() % 4 == 0 && g.out_w() % 4 == 0;
  return tiles >= 48 ||
         (pass == OnednnPass::kWeightGrad && whole_tiles && tiles >= 32);
}

// The algorithm of a layer's oneDNN passes (or of its weight gradient, or
// its evaluation): Winograd where oneDNN has it and it pays (or is asked
// for), else direct.
conv_internal::OnednnAlgorithm OnednnAlgorithmOf(
    const ConvGeometry& g, const ConvWorkspace<float>& ws,
    OnednnPass pass = OnednnPass::kTraining) {
  const bool wanted =
      ws.algorithm == ConvAlgorithm::kWinograd ||
      (ws.algorithm == ConvAlgorithm::kAuto && OnednnWinogradPays(g, pass));
  return wanted && conv_internal::OnednnWinogradApplies(g, ws.channel_block)
             ? conv_internal::OnednnAlgorithm::kWinograd
             : conv_internal::OnednnAlgorithm::kDirect;
}

template <typename T>
void UngroupedForward(const ConvGeometry& g, const T* in, const T* weight,
                      const T* bias, T* out, ConvWorkspace<T>* ws) {
  DCHECK(g.out_h() > 0 && g.out_w() > 0);
  ws->winograd = UseWinograd<T>(g, *ws);
  ws->onednn = !ws->winograd && UseOnednn<T>(g, *ws);
  if constexpr (std::is_same_v<T, float>) {
    if (ws->winograd) {
      conv_internal::WinogradForward(g, in, weight, bias, out,
                                     &ws->transformed);
      ws->grid = ws->pointwise = false;
      ws->input = in;
      return;
    }
    if (ws->onednn) {
      if (TinyImagePays(g, *ws) &&
          !TinyImageOnednnTakes(g, *ws, TinyPass::kForward)) {
        TinyImageForward(g, in, weight, bias, out, ws);
      } else {
        // What a tiny image's other passes would reuse is not made here.
        ws->col_of_input = ws->tap_weights_forward = false;
        conv_internal::OnednnForward(g, ws->channel_block,
                                     OnednnAlgorithmOf(g, *ws), in, weight,
                                     bias, out, &ws->onednn_state);
      }
      ws->grid = ws->pointwise = false;
      ws->input = in;
      return;
    }
  }
  if (Pointwise(g) && ws->algorithm != ConvAlgorithm::kIm2col) {
    const int64_t np = g.positions();
    if (bias != nullptr) {
      BroadcastColumn<T>(g.out_channels, np, bias, out, np);
    }
    Gemm<T>(Trans::kNo, Trans::kNo, g.out_channels, np, g.in_channels, T(1),
            weight, g.in_channels, in, np, bias != nullptr ? T(1) : T(0), out,
            np);
    ws->grid = false;
    ws->pointwise = true;
    ws->input = in;
    return;
  }
  ws->pointwise = false;
  ws->grid = UseGrid(g, *ws);
  if constexpr (std::is_same_v<T, float>) {
    if (ws->grid) {
      const GridConv grid = ForwardGrid(g);
      const float* x = in;
      if (!OneRow(g) && (g.pad_h > 0 || g.pad_w > 0)) {
        conv_internal::EnsureSize(
            &ws->padded, grid.channels * grid.batch * grid.height * grid.width);
        PadPlanes(in, g.in_channels * g.batch, g.in_h, g.in_w, g.pad_h, g.pad_w,
                  ws->padded.data());
        x = ws->padded.data();
      }
      if (UseChannels(grid, ws->algorithm)) {
        conv_internal::ChannelForward(grid, x, weight, bias, out, &ws->packed,
                                      &ws->scratch, &ws->offsets);
      } else {
        conv_internal::PackWeights(grid, weight, /*flip=*/false, &ws->packed);
        conv_internal::GridForward(grid, x, ws->packed, bias, out, &ws->scratch,
                                   &ws->offsets);
      }
      ws->input = x;
      return;
    }
  }
  Im2colForward(g, in, weight, bias, out, ws);
  ws->input = in;
}

template <typename T>
void UngroupedBackwardWeights(const ConvGeometry& g, const T* grad_out,
                              T* grad_weight, ConvWorkspace<T>* ws) {
  CHECK(ws->input != nullptr) << "ConvBackwardWeights before ConvForward";
  if constexpr (std::is_same_v<T, float>) {
    if (ws->onednn && TinyImagePays(g, *ws)) {  // a group; bias done
      TinyImageWeightGrad(g, grad_out, grad_weight, nullptr, ws);
      return;
    }
    if (ws->onednn) {  // a group of a grouped convolution; bias done
      conv_internal::OnednnBackwardWeights(
          g, ws->channel_block,
          OnednnAlgorithmOf(g, *ws, OnednnPass::kWeightGrad), ws->input,
          grad_out, grad_weight, nullptr, &ws->onednn_state);
      return;
    }
  }
  const int64_t kk = g.patch(), np = g.positions();
  if (ws->pointwise) {
    Gemm<T>(Trans::kNo, Trans::kYes, g.out_channels, kk, np, T(1), grad_out, np,
            ws->input, np, T(0), grad_weight, kk);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (ws->grid) {
      const GridConv grid = ForwardGrid(g);
      if (UseChannels(grid, ws->algorithm)) {
        conv_internal::ChannelWeightGrad(grid, ws->input, grad_out, grad_weight,
                                         &ws->scratch, &ws->offsets);
      } else {
        conv_internal::GridWeightGrad(grid, ws->input, grad_out, grad_weight,
                                      &ws->scratch, &ws->offsets);
      }
      return;
    }
  }
  Gemm<T>(Trans::kNo, Trans::kYes, g.out_channels, kk, np, T(1), grad_out, np,
          ws->col.data(), np, T(0), grad_weight, kk);
}

template <typename T>
void UngroupedBackwardInput(const ConvGeometry& g, const T* grad_out,
                            const T* weight, T* grad_in, ConvWorkspace<T>* ws) {
  if constexpr (std::is_same_v<T, float>) {
    if (UseWinograd<T>(g, *ws)) {
      conv_internal::WinogradBackwardInput(g, grad_out, weight, grad_in);
      return;
    }
    if (UseOnednn<T>(g, *ws) && TinyImagePays(g, *ws) &&
        !TinyImageOnednnTakes(g, *ws, TinyPass::kInputGrad)) {
      TinyImageBackwardInput(g, grad_out, weight, grad_in, ws);
      return;
    }
    if (UseOnednn<T>(g, *ws)) {
      conv_internal::OnednnBackwardInput(g, ws->channel_block,
                                         OnednnAlgorithmOf(g, *ws), grad_out,
                                         weight, grad_in, &ws->onednn_state);
      return;
    }
  }
  if (Pointwise(g) && ws->algorithm != ConvAlgorithm::kIm2col) {
    const int64_t np = g.positions();
    Gemm<T>(Trans::kYes, Trans::kNo, g.in_channels, np, g.out_channels, T(1),
            weight, g.in_channels, grad_out, np, T(0), grad_in, np);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (UseGrid(g, *ws)) {
      if (UseGridInputGrad(g, ws->algorithm)) {
        GridInputGrad(g, grad_out, weight, grad_in, ws);
      } else {
        conv_internal::ColumnInputGrad(g, grad_out, weight, grad_in,
                                       &ws->packed, &ws->scratch, &ws->offsets);
      }
      return;
    }
  }
  Im2colBackwardInput(g, grad_out, weight, grad_in, ws);
}

// Group `i`'s slice of a grouped convolution: its channels are contiguous
// in the batch-inner layouts and its weights are rows of the weight matrix.
struct GroupSlice {
  ConvGeometry g;  // groups = 1
  int64_t in_offset, out_offset, weight_offset, out_channels;
};

GroupSlice Slice(const ConvGeometry& g, int64_t i) {
  GroupSlice s;
  s.g = g;
  s.g.groups = 1;
  s.g.in_channels = g.in_channels / g.groups;
  s.g.out_channels = g.out_channels / g.groups;
  s.in_offset = i * s.g.in_channels * g.batch * g.in_h * g.in_w;
  s.out_offset = i * s.g.out_channels * g.positions();
  s.weight_offset = i * s.g.out_channels * g.patch();
  s.out_channels = s.g.out_channels;
  return s;
}

}  // namespace

void ConvForwardScaled(const ConvGeometry& g, const float* in,
                       const float* weight, const float* scale,
                       const float* shift, const float* residual, bool relu,
                       float* out, ConvWorkspace<float>* ws) {
  CHECK(ws->channel_block != 0 && g.groups == 1)
      << "scaled convolutions need channel-blocked activations, groups = 1";
  ws->input = nullptr;
  const conv_internal::ConvEpilogue epilogue{scale, shift, residual, relu};
  if (UseWinograd<float>(g, *ws) &&
      conv_internal::WinogradPaysInEvaluation(g)) {
    conv_internal::WinogradForwardScaled(g, in, weight, epilogue,
                                         ws->weights_frozen, &ws->eval_weights,
                                         &ws->eval_weights_source, out);
    return;
  }
  conv_internal::OnednnScaledForward(
      g, ws->channel_block, OnednnAlgorithmOf(g, *ws, OnednnPass::kEvaluation),
      in, weight, scale, shift, residual, relu, ws->weights_frozen, out,
      &ws->onednn_state);
}

template <typename T>
void ConvForward(const ConvGeometry& g, const T* in, const T* weight,
                 const T* bias, T* out, ConvWorkspace<T>* ws) {
  CHECK(ws->channel_block == 0 || g.groups == 1)
      << "channel-blocked activations need groups = 1";
  if (g.depthwise()) {
    conv_internal::DepthwiseForward(g, in, weight, bias, out, ws);
    return;
  }
  if (g.groups == 1) {
    UngroupedForward(g, in, weight, bias, out, ws);
    return;
  }
  ws->group_ws.resize(g.groups);
  for (int64_t i = 0; i < g.groups; ++i) {
    ConvWorkspace<T>& sub = ws->group_ws[i];
    sub.algorithm = ws->algorithm;
    const GroupSlice s = Slice(g, i);
    UngroupedForward(s.g, in + s.in_offset, weight + s.weight_offset,
                     bias != nullptr ? bias + i * s.out_channels : nullptr,
                     out + s.out_offset, &sub);
  }
  ws->input = in;
}

template <typename T>
void ConvBackwardWeights(const ConvGeometry& g, const T* grad_out,
                         T* grad_weight, T* grad_bias, ConvWorkspace<T>* ws) {
  CHECK(ws->input != nullptr) << "ConvBackwardWeights before ConvForward";
  if constexpr (std::is_same_v<T, float>) {
    if (g.groups == 1 && ws->winograd) {
      conv_internal::WinogradBackwardWeights(g, ws->transformed, grad_out,
                                             grad_weight, grad_bias);
      return;
    }
    if (g.groups == 1 && ws->onednn && TinyImagePays(g, *ws)) {
      TinyImageWeightGrad(g, grad_out, grad_weight, grad_bias, ws);
      return;
    }
    if (g.groups == 1 && ws->onednn) {  // the bias gradient comes fused
      conv_internal::OnednnBackwardWeights(
          g, ws->channel_block,
          OnednnAlgorithmOf(g, *ws, OnednnPass::kWeightGrad), ws->input,
          grad_out, grad_weight, grad_bias, &ws->onednn_state);
      return;
    }
  }
  if (grad_bias != nullptr) {
    const int64_t np = g.positions();
    RowSums<T>(g.out_channels, np, grad_out, np, grad_bias);
  }
  if (g.depthwise()) {
    conv_internal::DepthwiseWeightGrad(g, grad_out, grad_weight, ws);
    return;
  }
  if (g.groups == 1) {
    UngroupedBackwardWeights(g, grad_out, grad_weight, ws);
    return;
  }
  for (int64_t i = 0; i < g.groups; ++i) {
    const GroupSlice s = Slice(g, i);
    UngroupedBackwardWeights(s.g, grad_out + s.out_offset,
                             grad_weight + s.weight_offset, &ws->group_ws[i]);
  }
}

namespace {

// Where ConvBackward runs a oneDNN convolution's passes side by side on a
// team of two: at most this many multiply-adds a pass and this many
// weights. Both passes at two threads, side by side over one after the
// other, channel-blocked, on a 2-core AVX-512 VM: in conv_bench
// ("backward"), 1.0-1.3x for ResNet-18's layers at 32x32 input (38-75M
// multiply-adds a pass), 0.82-1.09x for ResNet-50's at 224 and ResNet-18's
// at CIFAR's 32x32 (0.4-1.2G), where oneDNN's own split of each pass loses
// less and the passes' unequal lengths cost more. Inside ResNet-18's
// training step at 32x32 input (tools/timeline-layers, alternating pairs),
// its layers of 64-128 channels took 0.85-1.04 of the time, but those of
// 256-512, whose weights (2.4-9.4 MB) both passes then read at once from
// beyond each core's cache, up to 1.2 times as long.
constexpr int64_t kSideBySideMultiplyAdds = int64_t{1} << 27;
constexpr int64_t kSideBySideWeights = int64_t{1} << 18;

// Whether ConvBackward runs a oneDNN convolution's two passes side by side.
bool SideBySidePays(const ConvGeometry& g, const ConvWorkspace<float>& ws) {
  if (ws.side_by_side == SideBySide::kNever || g.groups != 1 || !ws.onednn ||
      TinyImagePays(g, ws) || omp_in_parallel() || RangeSlots() != 2) {
    return false;
  }
  if (ws.side_by_side == SideBySide::kAlways) return true;
  // Measured on channel-blocked activations only: batch-inner ones would
  // also lose the input gradient's reuse of the reordered output gradient.
  const int64_t weights = g.out_channels * g.patch();
  return ws.channel_block != 0 &&
         g.positions() * weights <= kSideBySideMultiplyAdds &&
         weights <= kSideBySideWeights;
}

// Hands the weight gradient of a float convolution to the backward helper
// the caller runs under, if any, and runs the input gradient. False, and
// the passes run as usual, where they would share the workspace's scratch:
// groups, the own Winograd kernels and the patch-matrix kernels other than
// tiny maps' (whose split TinyImageBackwardHanded keeps apart).
bool HandToHelper(const ConvGeometry& g, const float* grad_out,
                  const float* weight, float* grad_weight, float* grad_bias,
                  float* grad_in, ConvWorkspace<float>* ws) {
  BackwardHelper* helper = BackwardHelper::Current();
  if (helper == nullptr || g.groups != 1 || !ws->onednn || ws->winograd) {
    return false;
  }
  ws->weights_as_in_forward = true;
  if (TinyImagePays(g, *ws)) {
    const bool onednn_input =
        grad_in != nullptr &&
        TinyImageOnednnTakes(g, *ws, TinyPass::kInputGrad);
    TinyImageBackwardHanded(g, grad_out, weight, grad_weight, grad_bias,
                            onednn_input ? nullptr : grad_in, ws, *helper);
    if (onednn_input) {
      conv_internal::OnednnBackwardInput(g, ws->channel_block,
                                         OnednnAlgorithmOf(g, *ws), grad_out,
                                         weight, grad_in, &ws->onednn_state);
    }
  } else {
    conv_internal::OnednnBackwardHanded(
        g, ws->channel_block,
        OnednnAlgorithmOf(g, *ws, OnednnPass::kWeightGrad),
        OnednnAlgorithmOf(g, *ws), ws->input, grad_out, weight, grad_weight,
        grad_bias, grad_in, &ws->onednn_state, *helper);
  }
  ws->weights_as_in_forward = false;
  return true;
}

}  // namespace

template <typename T>
void ConvBackward(const ConvGeometry& g, const T* grad_out, const T* weight,
                  T* grad_weight, T* grad_bias, T* grad_in,
                  ConvWorkspace<T>* ws) {
  CHECK(ws->input != nullptr) << "ConvBackward before ConvForward";
  if constexpr (std::is_same_v<T, float>) {
    if (HandToHelper(g, grad_out, weight, grad_weight, grad_bias, grad_in,
                     ws)) {
      return;
    }
    if (grad_in != nullptr && SideBySidePays(g, *ws)) {
      conv_internal::OnednnBackwardSideBySide(
          g, ws->channel_block,
          OnednnAlgorithmOf(g, *ws, OnednnPass::kWeightGrad),
          OnednnAlgorithmOf(g, *ws), ws->input, grad_out, weight, grad_weight,
          grad_bias, grad_in, &ws->onednn_state);
      ws->weights_as_in_forward = false;
      return;
    }
  }
  ConvBackwardWeights(g, grad_out, grad_weight, grad_bias, ws);
  if (grad_in == nullptr) return;
  ws->weights_as_in_forward = true;
  ConvBackwardInput(g, grad_out, weight, grad_in, ws);
}

template <typename T>
void ConvBackwardInput(const ConvGeometry& g, const T* grad_out,
                       const T* weight, T* grad_in, ConvWorkspace<T>* ws) {
  if (g.depthwise()) {
    conv_internal::DepthwiseInputGrad(g, grad_out, weight, grad_in, ws);
  } else if (g.groups == 1) {
    UngroupedBackwardInput(g, grad_out, weight, grad_in, ws);
  } else {
    ws->group_ws.resize(g.groups);
    for (int64_t i = 0; i < g.groups; ++i) {
      const GroupSlice s = Slice(g, i);
      ConvWorkspace<T>& sub = ws->group_ws[i];
      sub.weights_as_in_forward = ws->weights_as_in_forward;
      UngroupedBackwardInput(s.g, grad_out + s.out_offset,
                             weight + s.weight_offset, grad_in + s.in_offset,
                             &sub);
      sub.weights_as_in_forward = false;
    }
  }
  ws->weights_as_in_forward = false;
}

template struct ConvWorkspace<float>;
template struct ConvWorkspace<double>;

#define COHORT_INSTANTIATE_CONV(T)                                            \
  template void ConvForward<T>(const ConvGeometry&, const T*, const T*,       \
                               const T*, T*, ConvWorkspace<T>*);              \
  template void ConvBackwardWeights<T>(const ConvGeometry&, const T*, T*, T*, \
                                       ConvWorkspace<T>*);                    \
  template void ConvBackwardInput<T>(const ConvGeometry&, const T*, const T*, \
                                     T*, ConvWorkspace<T>*);                  \
  template void ConvBackward<T>(const ConvGeometry&, const T*, const T*, T*,  \
                                T*, T*, ConvWorkspace<T>*);

COHORT_INSTANTIATE_CONV(float)
COHORT_INSTANTIATE_CONV(double)
#undef COHORT_INSTANTIATE_CONV

}  // namespace cohort

// Convolution kernels of the CPU engine, on batch-inner activations.
//
// Layouts (see worker/layers/layer.h): input [C][N][H][W], output
// [OC][N][OH][OW], weight [OC][C][KH][KW], bias [OC]; a 1-D convolution is
// the case H = KH = 1, pad_h = 0. Zero padding. Most convolutions take one
// stride for both axes and pad each side of an axis alike ("uniform"); the
// others (conv2d's stride_hw, an odd padding SAME) run as im2col + GEMM.
//
// Algorithms, chosen per call:
//  - Winograd F(4x4, 3x3) (conv_winograd.h), float, 3x3, stride 1, padding
//    1, on channel-blocked activations where oneDNN runs AVX2 code (which
//    has no Winograd kernels of its own): 1.3-2.2x as fast as oneDNN's
//    direct kernels at ResNet's 3x3 layers of 32-512 channels on 4x4 to
//    56x56 maps, about even at 7x7 with 512 (conv_bench).
//  - oneDNN (conv_onednn.h), float, groups = 1 (or each group of another
//    grouped convolution): its channel-blocked primitives, reordering into
//    and out of their layouts, where they beat the kernels below: tens of
//    channels and more (ResNets), and most strided convolutions, which
//    would otherwise run as im2col (the measured rule is conv.cc's
//    OnednnWins).
//  - images of at most 4 output positions where oneDNN would run (ResNet's
//    last stages on 32x32 inputs): one product per pass over the patch
//    matrix of the kernel taps that read the image, leaving out those that
//    read only padding (conv_tiny_image.cc).
//  - depthwise (groups == C, out_channels a multiple of C), uniform, any
//    type, stride, dilation and padding: direct kernels
//    (conv_depthwise.cc) that vectorize over a whole channel's padded
//    planes.
//  - other groups > 1: the groups = 1 algorithms below on each group's
//    contiguous slice of channels (batch-inner layouts keep them so).
//  - dilation > 1 (groups = 1): im2col + GEMM.
//  - where oneDNN runs AVX2 code, stride 1 with at most 4x4 outputs and 256
//    channels a side or more (ResNet's last stage on 32x32 images), on
//    batch-inner activations: im2col + GEMM, which takes about half
//    oneDNN's time there (conv.cc's TinyImageWideChannels).
//  - 1x1, stride 1, no padding: one GEMM per pass on the layouts as they
//    are (unless kIm2col is forced).
//  - float, stride 1, uniform: hand-written AVX2 kernels (conv_internal.h)
//    that read
//    the (padded) input in place, never building an im2col matrix. Forward
//    and weight gradient vectorize either over output positions ("grid":
//    filter taps are shifted views of the input, but the K-1 columns per
//    row that yield no output are computed too) or over output channels
//    (no wasted positions, but channels padded to 16 and results
//    transposed). The input gradient is either the grid forward kernel on
//    the padded output gradient with flipped filters, or dcol = W^T dy in
//    cache-sized chunks followed by col2im (no products with the padding).
//    A cost model picks per pass.
//  - "im2col" (everything else, and all of double): one im2col matrix for
//    the whole batch and one GEMM per pass (OpenBLAS), with col2im for the
//    input gradient. This is the reference the grid kernels are tested
//    against.
//
// Ownership: ConvWorkspace holds every scratch buffer and what Forward
// leaves for the backward passes; its owner (the layer) keeps it from step
// to step, so buffers are allocated once. ConvBackward* use the input seen
// by the last ConvForward on the same workspace: the caller keeps that input
// alive and unchanged until then. Callers own all other pointers.
// Thread safety: none; one workspace per thread.
#ifndef COHORT_KERNELS_CONV_H_
#define COHORT_KERNELS_CONV_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "common/tensor.h"

namespace cohort {

struct ConvGeometry {
  int64_t batch = 1;        // N
  int64_t in_channels = 1;  // C
  int64_t in_h = 1;         // 1 for 1-D
  int64_t in_w = 1;         // W, or L for 1-D
  int64_t out_channels = 1;
  int64_t kernel_h = 1;  // 1 for 1-D
  int64_t kernel_w = 1;
  int64_t stride = 1;  // along the width, and the height unless stride_h
  // A height stride that differs from the width's (conv2d's stride_hw); 0:
  // `stride`. Zero means "the same" so that a square geometry sets one.
  int64_t stride_h = 0;
  int64_t pad_h = 0;  // zero rows above and below; 0 for 1-D
  int64_t pad_w = 0;  // zero columns left and right
  // More zero rows below and columns right than pad_h and pad_w: the odd
  // zero of a padding SAME, which PyTorch puts after.
  int64_t extra_h = 0;
  int64_t extra_w = 0;
  // Channel groups (PyTorch's groups; divides in_ and out_channels) and the
  // spacing between kernel taps.
  int64_t groups = 1;
  int64_t dilation = 1;

  // The extent of the dilated kernel.
  int64_t span_h() const { return dilation * (kernel_h - 1) + 1; }
  int64_t span_w() const { return dilation * (kernel_w - 1) + 1; }
  int64_t row_stride() const { return stride_h > 0 ? stride_h : stride; }
  int64_t out_h() const {
    return (in_h + 2 * pad_h + extra_h - span_h()) / row_stride() + 1;
  }
  int64_t out_w() const {
    return (in_w + 2 * pad_w + extra_w - span_w()) / stride + 1;
  }
  // One stride, and each axis padded alike on both sides: what the direct
  // kernels (depthwise, grid, channels, column) assume.
  bool uniform() const {
    return row_stride() == stride && extra_h == 0 && extra_w == 0;
  }
  // Rows of the im2col matrix: C / groups * KH * KW (the weights' fan-in).
  int64_t patch() const { return in_channels / groups * kernel_h * kernel_w; }
  // Output positions of the whole batch: N * OH * OW.
  int64_t positions() const { return batch * out_h() * out_w(); }
  // One group per input channel (out_channels a multiple of it), uniform:
  // the direct kernels of kernels/conv_depthwise.cc.
  bool depthwise() const {
    return groups > 1 && groups == in_channels && out_channels % groups == 0 &&
           uniform();
  }
};

enum class ConvAlgorithm {
  kAuto,    // per pass, the fastest by a cost model
  kIm2col,  // im2col + GEMM for every pass
  // Float, stride 1 only (other cases run as kAuto); tests and benchmarks
  // use these to compare the kernels kAuto chooses between.
  kGrid,      // position-vectorized grid kernels wherever they apply
  kChannels,  // channel-vectorized forward and weight gradient (images),
              // column input gradient
  // Float, groups = 1 (or each group of a grouped, not depthwise,
  // convolution): oneDNN's primitives for every pass.
  kOnednn,
  // Float, channel-blocked activations, 3x3, stride 1, padding 1: Winograd
  // F(4x4, 3x3) for every pass, cohort's kernels on nChw8c
  // (conv_winograd.h) and oneDNN's on nChw16c (conv_onednn.h); other
  // geometries run as kAuto.
  kWinograd,
};

// ConvWorkspace::side_by_side.
enum class SideBySide { kAuto, kNever, kAlways };

namespace conv_internal {
// oneDNN's primitives and buffers for one workspace (conv_onednn.h); opaque
// here so that users of conv.h need not see oneDNN's headers.
struct OnednnState;
struct OnednnStateDeleter {
  void operator()(OnednnState* state) const;
};
using OnednnStatePtr = std::unique_ptr<OnednnState, OnednnStateDeleter>;
}  // namespace conv_internal

// Scratch and saved state of one convolution layer; see the file comment.
// The fields are the kernels' business.
template <typename T>
struct ConvWorkspace {
  ConvAlgorithm algorithm = ConvAlgorithm::kAuto;
  // 0: activations and their gradients are batch-inner. 8 or 16
  // (kernels/channel_blocked.h): they are in oneDNN's nChw{B}c layout, as a
  // caller that keeps them between convolutions passes them; float and
  // groups = 1 only, and every pass then runs on oneDNN.
  int64_t channel_block = 0;
  // The weights will not change again (a model loaded to predict):
  // ConvForwardScaled keeps them converted to its layout.
  bool weights_frozen = false;
  // Set by the caller just before ConvBackwardInput when its weights are
  // those the last ConvForward on this workspace read, unchanged since (a
  // layer's Backward after its own Forward; not a transposed convolution,
  // whose forward is ConvBackwardInput): the pass may then reuse what the
  // forward pass derived from them. ConvBackwardInput clears it.
  bool weights_as_in_forward = false;
  // Whether ConvBackward runs the two passes side by side: where that
  // pays (kAuto), or, for tests and benchmarks, never or wherever it can.
  SideBySide side_by_side = SideBySide::kAuto;

  const T* input = nullptr;    // what the backward passes read (maybe padded)
  bool grid = false;           // the last forward used the grid algorithm
  bool pointwise = false;      // ... or was a 1x1 matrix product
  bool onednn = false;         // ... or ran on oneDNN
  bool winograd = false;       // ... or on the Winograd kernels
  BasicTensor<T> padded;       // zero-padded input (grid)
  BasicTensor<T> col;          // im2col matrix (im2col)
  BasicTensor<T> grad_col;     // its gradient (im2col)
  BasicTensor<T> grad_padded;  // padded output gradient (grid, input grad)
  BasicTensor<T> packed;       // packed weights (grid)
  BasicTensor<T> scratch;      // per-chunk outputs and partial sums (grid)
  BasicTensor<T> transformed;  // the input's Winograd transform (Winograd)
  // Tiny images: the weights of the kernel taps that read the image
  // (tap_weights_forward: as the last forward pass gathered them), and
  // those taps' weight gradient.
  BasicTensor<T> tap_weights;
  bool tap_weights_forward = false;
  BasicTensor<T> tap_grads;
  // Tiny images: `col` holds the patch matrix of `input` (built by the
  // forward pass, or by the weight gradient where oneDNN ran the forward).
  bool col_of_input = false;
  // The weights in the form the evaluation kernel reads (ConvForwardScaled
  // on Winograd: their transform), and while they are frozen, the weights
  // they were made from.
  BasicTensor<T> eval_weights;
  const T* eval_weights_source = nullptr;
  std::vector<int64_t> offsets;
  conv_internal::OnednnStatePtr onednn_state;  // primitives (oneDNN)
  // Grouped (not depthwise) convolutions: one workspace per group, each
  // running the groups = 1 algorithms on its slice of the channels.
  std::vector<ConvWorkspace<T>> group_ws;
};

// out = conv(in, weight) + bias (bias may be null). Remembers `in` (or its
// padded copy) in `ws` for the backward passes.
template <typename T>
void ConvForward(const ConvGeometry& g, const T* in, const T* weight,
                 const T* bias, T* out, ConvWorkspace<T>* ws);

// Overwrites grad_weight [OC][C][KH][KW] and, unless null, grad_bias [OC]
// with this batch's gradients, given grad_out [OC][N][OH][OW].
template <typename T>
void ConvBackwardWeights(const ConvGeometry& g, const T* grad_out,
                         T* grad_weight, T* grad_bias, ConvWorkspace<T>* ws);

// Overwrites grad_in [C][N][H][W] with dLoss/dIn.
template <typename T>
void ConvBackwardInput(const ConvGeometry& g, const T* grad_out,
                       const T* weight, T* grad_in, ConvWorkspace<T>* ws);

// Both backward passes of the last ConvForward on `ws`:
// ConvBackwardWeights, then, unless grad_in is null, ConvBackwardInput
// (whose `weight` must be the forward's, unchanged since). On a compute team
// of two threads, the passes of a oneDNN convolution run side by side where
// that is faster (conv.cc says where), each on one thread.
template <typename T>
void ConvBackward(const ConvGeometry& g, const T* grad_out, const T* weight,
                  T* grad_weight, T* grad_bias, T* grad_in,
                  ConvWorkspace<T>* ws);

// Whether oneDNN's primitives beat the other float algorithms for this
// (groups = 1) geometry, measured per shape (kernels/conv.cc); kAuto's
// choice, and where a caller may keep oneDNN's layout between layers.
bool OnednnWins(const ConvGeometry& g);

// Evaluation of a convolution (groups = 1, on ws->channel_block's layout)
// with what follows it folded in: out = act(conv(in, weight) * scale[oc] +
// shift[oc] + residual), `residual` (out's shape) optional, act ReLU when
// `relu`; a batch norm's running statistics give scale and shift. Keeps
// nothing for a backward pass. Runs on the Winograd kernels where they
// apply and the batch has 16 tiles or more (conv_winograd.h), else on
// oneDNN.
void ConvForwardScaled(const ConvGeometry& g, const float* in,
                       const float* weight, const float* scale,
                       const float* shift, const float* residual, bool relu,
                       float* out, ConvWorkspace<float>* ws);

extern template struct ConvWorkspace<float>;
extern template struct ConvWorkspace<double>;

}  // namespace cohort

#endif  // COHORT_KERNELS_CONV_H_

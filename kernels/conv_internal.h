// Float stride-1 convolution kernels (AVX2 + FMA), internal to kernels/.
//
// Grid (conv_grid.cc, conv_grid_wgrad.cc): a stride-1 convolution of a
// zero-padded input plane of width W reads input position q + kh*W + kw for
// output position q, when output positions are numbered on the *input's*
// grid (q = oh*W + ow). Every filter tap is then a plain shift of the input
// plane, so a GEMM microkernel (conv_tile.h) reads its B operand straight
// from the input: no im2col matrix, no packing. The price is the K-1
// columns per row that produce no output (ow >= OW); they are computed into
// a small scratch block and dropped when it is copied to the batch-inner
// output. Output rows oh >= OH are never computed. The same kernel gives the
// input gradient: the convolution of the output gradient, padded by
// K-1-pad, with the flipped and transposed filters (PackWeights(flip)).
//
// Channels (conv_channels.cc): output channels in the vector lanes, for
// small images where the grid's wasted columns are many (10 of 14).
//
// Column (conv_col.cc): the input gradient as dcol = W^T dy + col2im, for
// small images where the padded output gradient is mostly zeros.
//
// Im2col (conv_im2col.cc): the patch matrix and one product per pass, for
// every geometry and both scalar types.
//
// Tiny images (conv_tiny_image.cc): im2col over the kernel taps that read
// the image, for maps of at most 4 output positions.
//
// conv.cc chooses among them with a cost model. Buffers belong to the
// caller; scratch tensors grow here and keep their storage between calls.
// Thread safety: none; distinct scratch per thread.
#ifndef COHORT_KERNELS_CONV_INTERNAL_H_
#define COHORT_KERNELS_CONV_INTERNAL_H_

#include <cstdint>
#include <vector>

#include "common/tensor.h"
#include "kernels/conv.h"

namespace cohort {

class BackwardHelper;

namespace conv_internal {

// Makes `t` a flat tensor of at least n elements. Resize() takes a Shape,
// and building one allocates; scratch tensors are shared by the passes of a
// layer with different needs, so they only ever grow, and a steady-state
// step allocates nothing.
template <typename T>
void EnsureSize(BasicTensor<T>* t, int64_t n) {
  if (t->rank() != 1 || t->size() < n) t->Resize({n});
}

// A stride-1 convolution over batch-inner input [C][N][H][W] producing
// [OC][N][H-KH+1][W+2*pad_w-KW+1]. Weights are [OC][C][KH][KW]. Padding is
// virtual (pad_w > 0) only when there is one output row (1-D, H == KH);
// otherwise the caller pads the input in memory and pad_w is 0.
struct GridConv {
  int64_t channels = 0;
  int64_t batch = 0;
  int64_t height = 0;
  int64_t width = 0;
  int64_t out_channels = 0;
  int64_t kernel_h = 1;
  int64_t kernel_w = 1;
  int64_t pad_w = 0;

  int64_t out_h() const { return height - kernel_h + 1; }
  int64_t out_w() const { return width + 2 * pad_w - kernel_w + 1; }
  int64_t patch() const { return channels * kernel_h * kernel_w; }
  // One past the last grid position of a sample that yields an output:
  // rows oh >= OH are never visited, and reading the input at any tap of a
  // position below the span stays inside the sample.
  int64_t span() const { return (out_h() - 1) * width + out_w(); }
};

// Offsets in the flat [C][N][H][W] input of every filter tap (c, kh, kw),
// relative to the output position.
void TapOffsets(const GridConv& g, std::vector<int64_t>* offsets);

// Lays weights out for GridForward. With flip = false `w` is this conv's
// [OC][C][KH][KW] tensor. With flip = true `w` is the *forward* layer's
// weight [C][OC][KH][KW] (g.channels and g.out_channels swapped relative to
// it) and is transposed and rotated by 180 degrees, for the input gradient.
// `packed` gets g.out_channels * g.patch() floats.
void PackWeights(const GridConv& g, const float* w, bool flip, Tensor* packed);

// out[OC][N][OH][OW] = conv(x, w) (+ bias[oc] when bias is non-null).
void GridForward(const GridConv& g, const float* x, const Tensor& packed,
                 const float* bias, float* out, Tensor* scratch,
                 std::vector<int64_t>* offsets);

// grad_w[OC][C][KH][KW] = sum over batch and positions of
// grad_out[oc][n][oh][ow] * x[c][n][oh+kh][ow+kw]. Overwrites grad_w.
void GridWeightGrad(const GridConv& g, const float* x, const float* grad_out,
                    float* grad_w, Tensor* scratch,
                    std::vector<int64_t>* offsets);

// The same convolution with output channels, not positions, in the vector
// lanes (conv_channels.cc): a tile is 6 output positions x 16 channels,
// each position's input read by broadcasts from wherever it lies, so only
// valid positions are computed (no grid columns wasted), at the price of
// padding the channels to a multiple of 16 and transposing the results.
// Faster than the grid when OW is small next to W (e.g. 10 of 14) and the
// channel count is a multiple of 16. g.pad_w must be 0. `w` is the
// [OC][C][KH][KW] weight.
void ChannelForward(const GridConv& g, const float* x, const float* w,
                    const float* bias, float* out, Tensor* packed,
                    Tensor* scratch, std::vector<int64_t>* offsets);
void ChannelWeightGrad(const GridConv& g, const float* x, const float* grad_out,
                       float* grad_w, Tensor* scratch,
                       std::vector<int64_t>* offsets);

// The input gradient of a stride-1 convolution as dcol = W^T * grad_out
// on the compact output positions followed by col2im, a chunk of positions
// at a time (conv_col.cc). Unlike the grid version it never multiplies the
// zero padding of the output gradient, which for small images with large
// kernels is most of it (10x10 outputs padded by 4 for a 5x5 kernel).
// Overwrites grad_in.
void ColumnInputGrad(const ConvGeometry& g, const float* grad_out,
                     const float* weight, float* grad_in, Tensor* packed,
                     Tensor* scratch, std::vector<int64_t>* offsets);

// Kernel taps, numbered kh * kernel_w + kw: every one, in order.
std::vector<int64_t> AllTaps(const ConvGeometry& g);
// The patch matrix of the listed taps (conv_im2col.cc):
// col[(c, t)][n][oh][ow] = in[c][n][oh*s + kh*d - ph][ow*s + kw*d - pw]
// for tap t = taps[i] at row c * taps.size() + i; zero outside the image.
template <typename T>
void Im2col(const ConvGeometry& g, const T* in,
            const std::vector<int64_t>& taps, T* col);
// Its adjoint: grad_in (zeroed here) += scattered col.
template <typename T>
void Col2im(const ConvGeometry& g, const T* col,
            const std::vector<int64_t>& taps, T* grad_in);

// The im2col passes (conv_im2col.cc), for every geometry: out = W col(in)
// + bias, keeping col in ws->col for the weight gradient (dW = dy col^T);
// and grad_in = col2im(W^T grad_out), through ws->grad_col.
template <typename T>
void Im2colForward(const ConvGeometry& g, const T* in, const T* weight,
                   const T* bias, T* out, ConvWorkspace<T>* ws);
template <typename T>
void Im2colBackwardInput(const ConvGeometry& g, const T* grad_out,
                         const T* weight, T* grad_in, ConvWorkspace<T>* ws);

// Images of at most 4 output positions where oneDNN would run
// (conv_tiny_image.cc): whether their passes run as one product over the patch
// matrix, and those passes, on either layout of ws->channel_block. `g` is
// one group's geometry.
bool TinyImagePays(const ConvGeometry& g, const ConvWorkspace<float>& ws);
// The passes of a tiny-image convolution that oneDNN runs instead where it
// wins (TinyImageOnednnTakes); the weight gradient never: oneDNN's took
// 1.3-2.3 times as long at every such shape.
enum class TinyPass { kForward, kInputGrad };
bool TinyImageOnednnTakes(const ConvGeometry& g, const ConvWorkspace<float>& ws,
                          TinyPass pass);
void TinyImageForward(const ConvGeometry& g, const float* in,
                      const float* weight, const float* bias, float* out,
                      ConvWorkspace<float>* ws);
void TinyImageWeightGrad(const ConvGeometry& g, const float* grad_out,
                         float* grad_weight, float* grad_bias,
                         ConvWorkspace<float>* ws);
void TinyImageBackwardInput(const ConvGeometry& g, const float* grad_out,
                            const float* weight, float* grad_in,
                            ConvWorkspace<float>* ws);
// Both gradients inside a BackwardHelper::Run body: the input gradient now
// (if grad_in is not null) and the weight gradient pushed to `helper`,
// which then uses `ws` until it has run it.
void TinyImageBackwardHanded(const ConvGeometry& g, const float* grad_out,
                             const float* weight, float* grad_weight,
                             float* grad_bias, float* grad_in,
                             ConvWorkspace<float>* ws, BackwardHelper& helper);

}  // namespace conv_internal
}  // namespace cohort

#endif  // COHORT_KERNELS_CONV_INTERNAL_H_

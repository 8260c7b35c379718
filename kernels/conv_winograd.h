// Winograd F(4x4, 3x3) convolutions on channel-blocked activations (nChw8c,
// kernels/channel_blocked.h), internal to kernels/.
//
// Why: oneDNN 2.6 has Winograd kernels for AVX-512 only. On AVX2 its direct
// 3x3 kernels run at about 60% of a core's peak, and the 3x3 stride-1
// convolutions are most of a ResNet's work. F(4x4, 3x3) computes a 4x4 block
// of outputs from a 6x6 block of input with 36 multiplications per channel
// pair instead of 144, in three steps: transform every 6x6 input tile
// (V = B^T d B) and every 3x3 kernel (U = G g G^T), multiply the transforms
// elementwise and sum over input channels (36 matrix products, one per
// element of a tile: [tiles x C] by [C x OC]), and transform back
// (Y = A^T M A). The matrices are Lavin and Gray's (points 0, +-1, +-2).
//
// The backward passes follow the same algebra:
//  - input gradient: the same algorithm on the output gradient with the
//    kernels flipped and their channels swapped (a 3x3 convolution padded by
//    1 is its own transpose up to that flip);
//  - weight gradient: the chain rule through the forward's steps,
//    dU[e] = V[e]^T (A dY A^T)[e] summed over tiles, then dg = G^T dU G;
//    V is the forward's transformed input, kept in `saved`.
// Results equal a direct convolution's up to float rounding, which the
// transforms' constants (up to 8, down to 1/24) make a few times larger:
// within 2e-5 of the largest value of im2col's passes in double
// (kernels:conv_onednn_test), 1-3e-5 at ResNet's shapes (conv_bench).
//
// Layouts: activations and gradients nChw8c; weights [OC][C][3][3]; the
// transformed input [36][tiles][C], so that each product is one row-major
// GEMM (kernels/gemm.h); the products' other operands, the transformed
// weights ([36][C][OC]) and output gradient ([36][tiles][OC]), in
// PanelSgemm's column panels, written so by their transforms.
//
// Ownership: the caller owns every pointer and `saved`; temporaries live in
// a per-thread arena shared by all layers of the thread. Thread safety: one
// call per thread at a time; each call splits its loops over the calling
// thread's compute team (kernels/parallel.h).
#ifndef COHORT_KERNELS_CONV_WINOGRAD_H_
#define COHORT_KERNELS_CONV_WINOGRAD_H_

#include <cstdint>

#include "common/tensor.h"
#include "kernels/conv.h"
#include "kernels/conv_epilogue.h"

namespace cohort {
namespace conv_internal {

// Whether these kernels run `g` on activations in nChw{block}c: float, 3x3,
// stride 1, padding 1 on every side, no dilation, groups = 1, block 8.
bool WinogradApplies(const ConvGeometry& g, int64_t block);

// out = conv(in, weight) + bias (bias may be null); keeps the transformed
// input in *saved for WinogradBackwardWeights.
void WinogradForward(const ConvGeometry& g, const float* in,
                     const float* weight, const float* bias, float* out,
                     BasicTensor<float>* saved);

// Whether WinogradForwardScaled beats oneDNN's direct kernels on `g` (which
// WinogradApplies to): with fewer than 16 tiles in the batch (ResNet-50's
// 7x7 layers at batch 1-3), reading the transformed weights, four times the
// size of the weights, costs more than the multiplications it saves
// (kernels:conv_bench, "eval").
bool WinogradPaysInEvaluation(const ConvGeometry& g);

// out = epilogue(conv(in, weight)), for evaluation (ConvForwardScaled);
// keeps nothing for a backward pass. When `frozen`, the transformed weights
// live in *kept, made again only when *kept_source is not `weight` (and
// *kept_source then set to it); else they are made on every call.
void WinogradForwardScaled(const ConvGeometry& g, const float* in,
                           const float* weight, const ConvEpilogue& epilogue,
                           bool frozen, BasicTensor<float>* kept,
                           const float** kept_source, float* out);

// grad_weight (and grad_bias unless null) of the input whose transform the
// last WinogradForward of the same geometry left in `saved`.
void WinogradBackwardWeights(const ConvGeometry& g,
                             const BasicTensor<float>& saved,
                             const float* grad_out, float* grad_weight,
                             float* grad_bias);

// grad_in = dLoss/dIn; needs no earlier forward.
void WinogradBackwardInput(const ConvGeometry& g, const float* grad_out,
                           const float* weight, float* grad_in);

}  // namespace conv_internal
}  // namespace cohort

#endif  // COHORT_KERNELS_CONV_WINOGRAD_H_

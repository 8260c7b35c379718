// Direct depthwise convolution kernels (internal to kernels/conv.cc).
//
// A depthwise convolution (groups == in_channels, out_channels = m * C)
// does KH * KW multiply-adds per output, far too few for im2col + GEMM per
// group to pay. These kernels instead pad each input channel's planes (all
// N samples, contiguous in the batch-inner layout [C][N][H][W]) once and
// compute on the padded grid: output position (oh, ow) of sample n sits at
// grid position q = n*Hp*Wp + oh*s*Wp + ow*s, and filter tap (kh, kw) reads
// grid position q + kh*d*Wp + kw*d. Every tap is then one long contiguous
// multiply-add over a block of samples, which vectorizes whatever the plane
// size; the grid positions that are not outputs (stride, the padding
// columns, the gaps between samples) are computed and dropped. For stride s
// that wastes s*s of the work, which the MobileNet-style models' few
// strided layers afford.
//
// Any element type, stride, dilation and padding; 3x3 layers with padding 1
// on wide planes pass to the row kernels (conv_depthwise_rows.h), with the
// same bits except for the weight gradient, which they sum in another
// order. Output channel oc reads input channel oc / m. Scratch lives
// in the caller's ConvWorkspace (`padded` keeps the padded input for the
// weight gradient).
// Thread safety: none; one workspace per thread.
#ifndef COHORT_KERNELS_CONV_DEPTHWISE_H_
#define COHORT_KERNELS_CONV_DEPTHWISE_H_

#include "kernels/conv.h"

namespace cohort {
namespace conv_internal {

// out[OC][N][OH][OW] = depthwise conv(in) (+ bias[oc] when non-null).
template <typename T>
void DepthwiseForward(const ConvGeometry& g, const T* in, const T* weight,
                      const T* bias, T* out, ConvWorkspace<T>* ws);

// Overwrites grad_weight [OC][1][KH][KW] from the input of the last
// DepthwiseForward on `ws`.
template <typename T>
void DepthwiseWeightGrad(const ConvGeometry& g, const T* grad_out,
                         T* grad_weight, ConvWorkspace<T>* ws);

// Overwrites grad_in [C][N][H][W].
template <typename T>
void DepthwiseInputGrad(const ConvGeometry& g, const T* grad_out,
                        const T* weight, T* grad_in, ConvWorkspace<T>* ws);

}  // namespace conv_internal
}  // namespace cohort

#endif  // COHORT_KERNELS_CONV_DEPTHWISE_H_

// Row kernels for the most common depthwise convolution (internal to
// kernels/conv_depthwise.cc): 3x3, padding 1, dilation 1, stride 1 or 2, as
// MobileNets use it. They read the input planes in place and write each
// output row straight to the output, where the grid kernels
// (conv_depthwise.h) copy the input into a zero-bordered grid and every
// output row out of it: two passes over each tensor fewer, on the wide
// planes where those copies cost the most. Narrow planes stay on the grid,
// whose contiguous runs span samples.
//
// Same bits as the grid kernels: each output sums the bias and then the
// nine taps in order, each a fused multiply-add (as GCC contracts the grid
// kernels' loops), a tap outside the input reading 0.
// Plain functions; thread-safe for disjoint outputs (channels go to the
// compute threads).
#ifndef COHORT_KERNELS_CONV_DEPTHWISE_ROWS_H_
#define COHORT_KERNELS_CONV_DEPTHWISE_ROWS_H_

#include "kernels/conv.h"

namespace cohort {
namespace conv_internal {

// Whether DepthwiseRowsForward takes depthwise geometry `g`.
bool DepthwiseRowsForwardApplies(const ConvGeometry& g);
// ... and DepthwiseRowsInputGrad: the same at multiplier 1. At stride 1
// the input gradient is the forward pass of the output gradient with the
// taps mirrored; at stride 2 each input row reads one or two output rows
// (conv_depthwise_rows_grad.cc), their taps summed in the grid's order.
bool DepthwiseRowsInputGradApplies(const ConvGeometry& g);

// out[OC][N][OH][OW] = depthwise conv(in) (+ bias[oc] when non-null).
// `ws->scratch` holds a row of zeros during the call.
template <typename T>
void DepthwiseRowsForward(const ConvGeometry& g, const T* in, const T* weight,
                          const T* bias, T* out, ConvWorkspace<T>* ws);

// Overwrites grad_in [C][N][H][W]; `ws` as above.
template <typename T>
void DepthwiseRowsInputGrad(const ConvGeometry& g, const T* grad_out,
                            const T* weight, T* grad_in, ConvWorkspace<T>* ws);

// Its stride-2 half (conv_depthwise_rows_grad.cc).
template <typename T>
void DepthwiseRowsInputGradStride2(const ConvGeometry& g, const T* grad_out,
                                   const T* weight, T* grad_in);

// Overwrites grad_weight [OC][1][3][3] from the unpadded input `in` of a
// layer DepthwiseRowsForward takes; `ws->packed` holds partial sums during
// the call. The sums run over rows in another order than the grid
// kernels', so the bits may differ from theirs by rounding.
template <typename T>
void DepthwiseRowsWeightGrad(const ConvGeometry& g, const T* in,
                             const T* grad_out, T* grad_weight,
                             ConvWorkspace<T>* ws);

}  // namespace conv_internal
}  // namespace cohort

#endif  // COHORT_KERNELS_CONV_DEPTHWISE_ROWS_H_

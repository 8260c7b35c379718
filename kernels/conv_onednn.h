// Float convolutions through oneDNN's primitives, internal to kernels/.
//
// oneDNN's convolutions keep activations in channel-blocked layouts
// (nChw16c with AVX-512, nChw8c with AVX2) and beat the hand-written kernels
// of conv_internal.h once there are tens of channels or more (conv_bench's
// ResNet shapes). cohort's batch-inner layouts are described to oneDNN as
// strided tensors (input [C][N][H][W] is logical {N, C, H, W} with strides
// {H*W, N*H*W, W, 1}); the primitives choose their own layouts
// (format_tag::any) and every pass reorders into and out of them, so the
// caller sees cohort's layouts only.
//
// Building a primitive costs far more than running a small one, so
// OnednnState keeps, per geometry, the primitives, the reorders and the
// forward's reordered input (which the weight gradient reads, as the other
// algorithms read the input the forward saw). Temporary layouts (output,
// output gradient, input gradient, weights) live in a per-thread arena that
// every workspace of the thread shares: they live for one pass only, and a
// model-wide arena keeps the memory of a deep network near one layer's.
//
// Threads: the primitives run on OpenMP (Debian's libdnnl). OpenMP's thread
// count is per calling thread; SetOnednnThreads fixes it for every thread
// that runs these kernels, which a replica thread started after
// omp_set_num_threads would otherwise not inherit.
//
// Ownership: an OnednnState belongs to one ConvWorkspace (see conv.h) and
// holds its engine, stream and primitives. Thread safety: none; one state
// per thread, as for the workspace.
#ifndef COHORT_KERNELS_CONV_ONEDNN_H_
#define COHORT_KERNELS_CONV_ONEDNN_H_

#include <memory>

#include "kernels/conv.h"
#include "kernels/onednn_threads.h"

namespace cohort {

class BackwardHelper;

namespace conv_internal {

// `block`: 0 for batch-inner activations and gradients; 8 or 16 for
// activations kept in oneDNN's own nChw{block}c layout
// (ConvWorkspace::channel_block), which no pass then reorders.
//
// `algorithm`: oneDNN's direct kernels, or its Winograd kernels (AVX-512
// only: F(4x4, 3x3) for training's three passes, F(2x2, 3x3) with
// pre-transformed weights for evaluation) where OnednnWinogradApplies. A
// pass whose descriptors oneDNN's Winograd does not take (evaluation with a
// residual sum, say) runs direct. Each pass may name its own: the weight
// gradient reads the forward's input, whatever the forward's algorithm.
enum class OnednnAlgorithm { kDirect, kWinograd };

// Whether oneDNN 2.6 has Winograd kernels for `g` on nChw{block}c: block 16
// (AVX-512 code), 3x3, stride 1, padding 1 on every side, no dilation,
// groups = 1, channels in whole blocks.
bool OnednnWinogradApplies(const ConvGeometry& g, int64_t block);

// out = conv(in, weight) + bias (bias may be null); keeps what the weight
// gradient needs in *state (created on first use).
void OnednnForward(const ConvGeometry& g, int64_t block,
                   OnednnAlgorithm algorithm, const float* in,
                   const float* weight, const float* bias, float* out,
                   OnednnStatePtr* state);

// Evaluation on channel-blocked activations (block != 0):
//   out = act(conv(in, weight) * scale[oc] + shift[oc] + residual)
// with residual (of out's shape and layout) optional and act ReLU when
// `relu`: a convolution, the batch norm after it, a residual sum and a
// ReLU in one pass over the output. Keeps nothing for a backward pass.
// `frozen`: `weight` will not change again, so its converted copy is kept
// and reused while the same pointer comes. Unfrozen, Winograd's transformed
// weights are kept too and reused while weight * scale keeps its bits
// (checked on every call, at the cost of folding the scale in).
void OnednnScaledForward(const ConvGeometry& g, int64_t block,
                         OnednnAlgorithm algorithm, const float* in,
                         const float* weight, const float* scale,
                         const float* shift, const float* residual, bool relu,
                         bool frozen, float* out, OnednnStatePtr* state);

// Whether the last OnednnForward or OnednnScaledForward on *state ran one
// of oneDNN's Winograd kernels (tests and benchmarks).
bool OnednnRanWinograd(const OnednnStatePtr& state);

// grad_weight (and grad_bias unless null) of the input seen by the last
// OnednnForward on *state, whose geometry must be g; `in` is that input.
void OnednnBackwardWeights(const ConvGeometry& g, int64_t block,
                           OnednnAlgorithm algorithm, const float* in,
                           const float* grad_out, float* grad_weight,
                           float* grad_bias, OnednnStatePtr* state);

// grad_in = dLoss/dIn; needs no earlier forward (a transposed convolution
// runs it as its own forward). Right after OnednnBackwardWeights on the
// same grad_out, reuses that pass's reordered copy of it.
void OnednnBackwardInput(const ConvGeometry& g, int64_t block,
                         OnednnAlgorithm algorithm, const float* grad_out,
                         const float* weight, float* grad_in,
                         OnednnStatePtr* state);

// Both gradients of OnednnBackwardWeights and OnednnBackwardInput at once:
// the weight gradient on the calling thread and the input gradient on a
// second thread of an OpenMP team of two, each primitive built for one
// thread. At the few milliseconds a pass of ResNet-18's layers takes,
// oneDNN's own split of each pass over two threads gains only 1.2-1.8x
// (conv_bench), and the two passes, which need nothing of each other, cost
// about the same. The weight gradient has the bits of a one-thread run.
// Call outside any OpenMP parallel region.
void OnednnBackwardSideBySide(const ConvGeometry& g, int64_t block,
                              OnednnAlgorithm weights_algorithm,
                              OnednnAlgorithm data_algorithm, const float* in,
                              const float* grad_out, const float* weight,
                              float* grad_weight, float* grad_bias,
                              float* grad_in, OnednnStatePtr* state);

// Both gradients inside a BackwardHelper::Run body: the input gradient now
// (if grad_in is not null), on the calling thread, and the weight gradient
// pushed to `helper`, each primitive built for one thread. `in`,
// `grad_out` and the gradients' buffers stay alive and unchanged until the
// helper has run it; the state is not used again before then.
void OnednnBackwardHanded(const ConvGeometry& g, int64_t block,
                          OnednnAlgorithm weights_algorithm,
                          OnednnAlgorithm data_algorithm, const float* in,
                          const float* grad_out, const float* weight,
                          float* grad_weight, float* grad_bias, float* grad_in,
                          OnednnStatePtr* state, BackwardHelper& helper);

}  // namespace conv_internal
}  // namespace cohort

#endif  // COHORT_KERNELS_CONV_ONEDNN_H_

// oneDNN's channel-blocked activation layout, nChw{B}c, and conversions
// between it and the engine's batch-inner layout.
//
// oneDNN's convolutions run on activations whose channels come in blocks of
// B (one vector register of floats: 16 with AVX-512, 8 with AVX2):
// element (n, c, p) of N samples, C channels and P = H * W positions lies at
//   ((n * (C / B) + c / B) * P + p) * B + c % B.
// A chain of convolutions, batch norms, ReLUs and sums (a residual block)
// can keep its activations in this layout and convert only at its edges,
// where each convolution would otherwise reorder its input, output and
// output gradient on every pass.
//
// Thread safety: the functions are thread-safe; each thread keeps its own
// reorder primitives.
#ifndef COHORT_KERNELS_CHANNEL_BLOCKED_H_
#define COHORT_KERNELS_CHANNEL_BLOCKED_H_

#include <cstdint>

namespace cohort {

// B on this machine for oneDNN's float convolutions: 16 where oneDNN runs
// AVX-512 code, 8 with AVX2, 0 where neither (no channel-blocked path).
int64_t NativeChannelBlock();

// Batch-inner [C][N][P] to nChw{block}c, and back; channels a multiple of
// block. Run on oneDNN's threads (kernels/onednn_threads.h).
void ToChannelBlocked(const float* in, int64_t channels, int64_t batch,
                      int64_t positions, int64_t block, float* out);
void FromChannelBlocked(const float* in, int64_t channels, int64_t batch,
                        int64_t positions, int64_t block, float* out);

}  // namespace cohort

#endif  // COHORT_KERNELS_CHANNEL_BLOCKED_H_

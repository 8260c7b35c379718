// ToSequence on the GPU: NCHW {N, C, H, W} as the sequence {N, C, H * W}
// (worker/layers/to_sequence.h). In NCHW each channel's pixels are already
// in that row-major order, so forward and backward are device copies.
//
// Ownership: the layer owns nothing; it remembers only sizes. Thread
// safety: none; one thread drives a layer, on its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_TO_SEQUENCE_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_TO_SEQUENCE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"

namespace cohort {

class GpuToSequence : public GpuLayer {
 public:
  GpuToSequence() = default;

  std::string Name() const override { return "to_sequence"; }
  // {C, H, W} -> {C, H * W}; InvalidArgument otherwise.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  int64_t size_ = 0, n_ = 0;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_TO_SEQUENCE_H_

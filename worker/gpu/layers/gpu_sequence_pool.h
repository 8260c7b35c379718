// SequencePool on the GPU: the mean of a sequence {N, D, L} over its L
// positions, dense {N, D} (worker/layers/sequence_pool.h). The sequence is
// a {D, 1, L} image to cuDNN, so this is the global average pool over a
// 1 x L window, and the layer delegates to GpuPool.
//
// Ownership: the layer owns its pool (and through it the cuDNN
// descriptors), which keeps pointers to the last forward input and output
// for Backward. Thread safety: none; one thread drives a layer, on its
// GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_SEQUENCE_POOL_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_SEQUENCE_POOL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"
#include "worker/gpu/layers/gpu_pool.h"

namespace cohort {

class GpuSequencePool : public GpuLayer {
 public:
  GpuSequencePool() = default;

  std::string Name() const override { return "sequence_pool(mean)"; }
  // {D, L} -> {D}; InvalidArgument otherwise.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  GpuPool pool_{GpuPool::Kind::kGlobalAvg, 0, 0, 0};
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_SEQUENCE_POOL_H_

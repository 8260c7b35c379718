// Inverted dropout on the GPU with a counter-based mask
// (kernels/cuda/dropout_rng.h): each training forward takes the next range
// of counters, and backward regenerates the same mask instead of storing
// it. The masks are not the CPU layer's (its generator is a Mersenne
// twister), so GPU and CPU runs with dropout agree in distribution, not
// element by element.
//
// Ownership: the layer owns nothing; it keeps its seed and counters.
// Thread safety: none; one thread drives a layer, on its GpuContext's
// stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_DROPOUT_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_DROPOUT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"

namespace cohort {

class GpuDropout : public GpuLayer {
 public:
  explicit GpuDropout(double p) : p_(p) {}

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  void SeedRandom(uint64_t seed) override { seed_ = seed; }
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  const double p_;
  int64_t size_ = 0, count_ = 0;
  bool train_ = false;
  uint64_t seed_ = 0, offset_ = 0, next_offset_ = 0;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_DROPOUT_H_

// The branch block on the GPU (worker/layers/branch.h): paths of layers
// over the same input whose outputs are concatenated along the channels
// (the features of a flat input), summed or multiplied.
//
// NCHW activations: a path's output is a block of channels in every
// sample, so concatenation (and its gradient's split) is one strided 2-D
// copy per path; a sum is one cuBLAS axpy per path; a product one kernel
// per path (kernels/cuda/branch_ops.h), a [C, 1, 1] gate path scaling each
// H*W plane and taking the plane sums as its gradient. Parameters and
// buffers concatenate the paths' in order, like the CPU block.
//
// Ownership: the block owns its layers, their activations and the
// gradients between them (device memory it keeps from step to step; no
// GpuContext scratch slot, which a nested block would share). Thread
// safety: none; one thread drives a layer, on its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_BRANCH_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_BRANCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"

namespace cohort {

class GpuBranch : public GpuLayer {
 public:
  using Path = std::vector<std::unique_ptr<GpuLayer>>;
  // `combine` other than SUM and MUL concatenates.
  GpuBranch(std::vector<Path> paths, BranchSpec::Combine combine);

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<int64_t> ParamSizes() const override;
  void Bind(const std::vector<float*>& v,
            const std::vector<float*>& g) override;
  std::vector<std::pair<float*, int64_t>> Buffers() override;
  void SeedRandom(uint64_t seed) override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  struct State {
    std::vector<int64_t> sizes;      // per-sample output elements per layer
    std::vector<DeviceFloats> acts;  // each layer's output
    DeviceFloats g_a, g_b;           // gradients inside the path
    DeviceFloats g_out;              // CONCAT, MUL: dLoss/d(path output)
    DeviceFloats g_in;               // dLoss/dIn through this path
    int64_t out_size = 0;            // per-sample output elements
    int64_t channels = 0;            // output channels (features)
    int64_t widest = 0;
    bool gate = false;  // MUL: [C, 1, 1] scaling a larger output
  };
  const float* Output(size_t p, const float* in) const;
  // MUL: the product of the paths' outputs into `out` (n samples).
  absl::Status Multiply(GpuContext& c, const float* in, float* out, int64_t n);
  // MUL: st.g_out of path p = dy times the other paths' outputs, summed
  // over each plane for a gate path.
  absl::Status ProductGradient(GpuContext& c, size_t p, const float* dy);
  // Multiplies `y` (n full outputs) by path q's output.
  absl::Status MultiplyBy(GpuContext& c, size_t q, const float* in, float* y,
                          int64_t n);

  std::vector<Path> paths_;
  BranchSpec::Combine combine_;
  std::vector<State> state_;
  DeviceFloats product_;  // MUL: a gate path's gradient before the sums
  int64_t in_size_ = 0, out_size_ = 0, plane_ = 1;  // plane: H*W, L or 1
  int64_t n_ = 0;
  const float* in_ = nullptr;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_BRANCH_H_

// The cuDNN pieces the convolution layers share (GpuConv and
// GpuConvTranspose, which runs its adjoint convolution's passes): an owner
// of a filter descriptor and the choice of the three algorithms of one
// convolution.
//
// Ownership: FilterDesc owns its descriptor; ChooseConvAlgorithms only
// reads the caller's descriptors. Thread safety: none beyond the
// GpuContext's; one thread drives a layer.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_CONV_ALGORITHMS_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_CONV_ALGORITHMS_H_

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/gpu/gpu_context.h"

namespace cohort {
namespace gpu_layers {

// RAII owner of a cuDNN NCHW filter descriptor, created on first Set.
class FilterDesc {
 public:
  FilterDesc() = default;
  ~FilterDesc();
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;

  absl::Status Set(int64_t k, int64_t c, int64_t h, int64_t w,
                   cudnnDataType_t type);
  cudnnFilterDescriptor_t get() const { return d_; }

 private:
  cudnnFilterDescriptor_t d_ = nullptr;
};

// The algorithms of one convolution x -> y with filter w, and the
// workspace the largest of them needs.
struct ConvAlgorithms {
  cudnnConvolutionFwdAlgo_t forward{};
  cudnnConvolutionBwdDataAlgo_t data{};
  cudnnConvolutionBwdFilterAlgo_t filter{};
  size_t workspace = 0;
};

// The fastest algorithms cuDNN's heuristics offer in the layer's math:
// plain FMA for float32, tensor cores allowed for `bf16`. Gradients prefer
// a deterministic algorithm, so that a step is reproducible run to run;
// bf16 falls back to the fastest one when none is deterministic.
// COHORT_CUDNN_DIRECT=1 leaves the transform-based algorithms (FFT,
// Winograd) out, to tell their rounding from an engine's error;
// COHORT_CUDNN_LOG prints the choice under `name`.
absl::StatusOr<ConvAlgorithms> ChooseConvAlgorithms(
    GpuContext& c, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
    cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, bool bf16,
    const std::string& name);

}  // namespace gpu_layers
}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_CONV_ALGORITHMS_H_

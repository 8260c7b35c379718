// The narrow interface between the nvcc-compiled elementwise losses
// (elementwise_loss.cu) and their host wrappers (elementwise_loss.cc): plain
// C++ types and cudaStream_t only. Use kernels/cuda/elementwise_loss.h
// instead.
#ifndef COHORT_KERNELS_CUDA_ELEMENTWISE_LOSS_LAUNCH_H_
#define COHORT_KERNELS_CUDA_ELEMENTWISE_LOSS_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cohort {
namespace cuda_internal {

// kernels/cuda/elementwise_loss.h's CudaElementLoss, as an int for nvcc.
enum class ElementKind { kMse, kL1, kHuber, kBce };

struct ElementwiseArgs {
  ElementKind kind;
  float delta;          // Huber only
  float scale;          // the gradient's factor: 2 / n for MSE, else 1 / n
  const float* pred;    // [n]
  const float* target;  // [n], or null for one-hot rows of `labels`
  const int32_t* labels;
  int64_t row;
  float* grad;  // [n] or null
};

// Over `blocks` blocks (ReducePartialBlocks(n), so the order of additions
// depends on n alone): the gradient, and partials[b] = block b's loss sum
// in double.
void LaunchElementwiseLoss(const ElementwiseArgs& args, int64_t n,
                           double* partials, int blocks, cudaStream_t stream);

// One block: *loss = (sum of partials[0, blocks)) / n as float (0 for
// n == 0).
void LaunchElementwiseLossFinish(const double* partials, int blocks, int64_t n,
                                 float* loss, cudaStream_t stream);

}  // namespace cuda_internal
}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_ELEMENTWISE_LOSS_LAUNCH_H_

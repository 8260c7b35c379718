// Elementwise losses forward and backward (see
// kernels/cuda/elementwise_loss.h), rounded as ElementwiseLoss in
// worker/loss.cc rounds them: the difference and the gradient in float, each
// element's loss term in double, the mean in double, so that the GPU agrees
// with the CPU to float rounding of the sum.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/elementwise_loss_launch.h"
#include "kernels/cuda/reduce_launch.h"

namespace cohort {
namespace cuda_internal {
namespace {

constexpr int kThreads = kReduceThreads;
constexpr int kWarps = kThreads / kWarpSize;

__device__ float TargetAt(const ElementwiseArgs& a, int64_t i) {
  if (a.target != nullptr) return a.target[i];
  const int64_t r = i / a.row;
  return a.labels[r] == i - r * a.row ? 1.0f : 0.0f;
}

// Element i's loss term; *d receives dLoss/dp before the 1 / n scale (for
// MSE, before the 2 / n scale: the CPU's MeanSquaredError multiplies the
// difference by 2 / n in one rounding).
template <ElementKind kKind>
__device__ double Term(float p, float t, float delta, float* d) {
  const float x = p - t;
  if (kKind == ElementKind::kMse) {
    *d = x;
    return static_cast<double>(x) * x;
  }
  if (kKind == ElementKind::kL1) {
    *d = static_cast<float>((x > 0) - (x < 0));
    return static_cast<double>(fabsf(x));
  }
  if (kKind == ElementKind::kHuber) {
    if (fabsf(x) < delta) {
      *d = x;
      return 0.5 * x * x;
    }
    *d = x > 0 ? delta : -delta;
    return static_cast<double>(delta) *
           (static_cast<double>(fabsf(x)) - 0.5 * delta);
  }
  // BCE with logits: e = exp(-|p|) never overflows, and sigmoid(p) comes
  // from it on either side of 0.
  const double e = exp(-fabs(static_cast<double>(p)));
  const double sig = p >= 0 ? 1 / (1 + e) : e / (1 + e);
  *d = static_cast<float>(sig - t);
  return fmax(static_cast<double>(p), 0.0) - static_cast<double>(p) * t +
         log1p(e);
}

template <ElementKind kKind>
__global__ void ElementwiseLossKernel(ElementwiseArgs a, int64_t n,
                                      double* partials) {
  __shared__ double slots[kWarps];
  double sum = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
       i < n; i += stride) {
    float d = 0;
    sum += Term<kKind>(a.pred[i], TargetAt(a, i), a.delta, &d);
    if (a.grad != nullptr) a.grad[i] = d * a.scale;
  }
  sum = BlockReduce<kThreads>(sum, AddOp(), slots);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void ElementwiseLossFinishKernel(const double* partials, int blocks,
                                            int64_t n, float* loss) {
  __shared__ double slots[kWarps];
  double total = 0;
  for (int b = threadIdx.x; b < blocks; b += kThreads) total += partials[b];
  total = BlockReduce<kThreads>(total, AddOp(), slots);
  if (threadIdx.x == 0) {
    *loss = n > 0 ? static_cast<float>(total / static_cast<double>(n)) : 0.0f;
  }
}

}  // namespace

void LaunchElementwiseLoss(const ElementwiseArgs& args, int64_t n,
                           double* partials, int blocks, cudaStream_t stream) {
  switch (args.kind) {
    case ElementKind::kMse:
      ElementwiseLossKernel<ElementKind::kMse>
          <<<blocks, kThreads, 0, stream>>>(args, n, partials);
      break;
    case ElementKind::kL1:
      ElementwiseLossKernel<ElementKind::kL1>
          <<<blocks, kThreads, 0, stream>>>(args, n, partials);
      break;
    case ElementKind::kHuber:
      ElementwiseLossKernel<ElementKind::kHuber>
          <<<blocks, kThreads, 0, stream>>>(args, n, partials);
      break;
    case ElementKind::kBce:
      ElementwiseLossKernel<ElementKind::kBce>
          <<<blocks, kThreads, 0, stream>>>(args, n, partials);
      break;
  }
}

void LaunchElementwiseLossFinish(const double* partials, int blocks, int64_t n,
                                 float* loss, cudaStream_t stream) {
  ElementwiseLossFinishKernel<<<1, kThreads, 0, stream>>>(partials, blocks, n,
                                                          loss);
}

}  // namespace cuda_internal
}  // namespace cohort

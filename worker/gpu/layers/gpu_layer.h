// The layer interface of cohort's GPU engine: the CPU engine's layer set
// (worker/layers/) on one CUDA device, with cuBLAS for Linear and cuDNN for
// convolution, BatchNorm, pooling and ReLU. One layer per file here, as in
// worker/layers/; MakeGpuLayer (gpu_layer_factory.h) builds one from a spec.
//
// Precision: activations, gradients between layers and parameters are
// float32 in both precisions. In BF16, Linear and convolution (also inside
// residual blocks) multiply bf16 copies of their inputs and weights with
// float32 accumulation on tensor cores and cast their results back; every
// other layer (BatchNorm, ReLU, pooling, sums, the loss) stays float32, as
// autocast keeps normalisation and reductions in float32.
//
// Activations are NCHW (PyTorch's layout): dense {N, F}, 1-D spatial
// {N, C, L}, 2-D spatial {N, C, H, W}; Flatten is then a plain copy. The
// parameters are the CPU layers', in the same order and layout (PyTorch's),
// bound as views into the model's flat device buffers, so one flat buffer
// moves between engines, optimizers and all-reduce unchanged.
//
// Forward keeps pointers to its input and output for Backward (the model
// keeps them alive). Backward overwrites parameter gradients, like the CPU
// layers. Ownership: a layer owns its descriptors and scratch memory, not
// the parameters or activations. Thread safety: none; one thread drives a
// layer, on its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_LAYER_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_LAYER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "worker/gpu/gpu_context.h"
#include "worker/layers/layer.h"

namespace cohort {

class GpuLayer {
 public:
  virtual ~GpuLayer() = default;
  virtual std::string Name() const = 0;
  // Per-sample input shape ({F}, {C, L} or {C, H, W}) to output shape, as
  // the CPU layer computes it.
  virtual absl::StatusOr<Shape> Configure(const Shape& in) = 0;
  // Element counts of the parameters, in the CPU layer's Params() order.
  virtual std::vector<int64_t> ParamSizes() const { return {}; }
  // Device views, one value and one gradient per ParamSizes() entry.
  virtual void Bind(const std::vector<float*>& values,
                    const std::vector<float*>& grads) {}
  // Running statistics (BatchNorm), in the CPU layer's Buffers() order:
  // device pointer and element count.
  virtual std::vector<std::pair<float*, int64_t>> Buffers() { return {}; }
  // Seeds the layer's randomness (dropout); replicas pass different seeds.
  virtual void SeedRandom(uint64_t seed) {}
  // `in` and `out` hold `n` samples.
  virtual absl::Status Forward(GpuContext& c, const float* in, float* out,
                               int64_t n, Mode mode) = 0;
  // `grad_in` may be null when nobody needs it (the first layer).
  virtual absl::Status Backward(GpuContext& c, const float* grad_out,
                                float* grad_in) = 0;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_LAYER_H_

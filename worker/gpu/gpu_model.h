// A sequential model on one CUDA device: the GPU layers of a model spec,
// with parameters and gradients in flat device buffers laid out exactly as
// the CPU model's (same offsets, alignment padding included), so the flat
// buffer moves between engines, the optimizer and all-reduce unchanged.
//
// Activations are NCHW on the device (worker/gpu/layers/gpu_layer.h). The
// model starts from the CPU model's parameters and buffers, so a GPU run
// and a CPU run from one seed begin identically.
//
// Ownership: owns its layers, the flat buffers and the activations; borrows
// the GpuContext, which must outlive it. Thread safety: none; one thread
// drives a model, on the context's stream.
#ifndef COHORT_WORKER_GPU_GPU_MODEL_H_
#define COHORT_WORKER_GPU_GPU_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"
#include "worker/model.h"

namespace cohort {

class GpuModel {
 public:
  // The GPU layers of `spec` for per-sample `input_shape`, laid out and
  // initialized as `cpu` (built from the same spec and shape), computing in
  // `precision` (worker/gpu/layers/gpu_layer.h; parameters, gradients and
  // activations stay float32 either way).
  static absl::StatusOr<std::unique_ptr<GpuModel>> Create(
      const ModelSpec& spec, const Shape& input_shape, Model<float>& cpu,
      GpuContext* context, Precision precision = FP32);

  // Seeds dropout; replicas pass different seeds.
  void SeedRandom(uint64_t seed);

  // Runs every layer on `input` (n samples, NCHW, on the device); returns
  // the device output [n, outputs], valid until the next Forward. In kTrain
  // mode `input` must stay unchanged until Backward.
  absl::StatusOr<const float*> Forward(const float* input, int64_t n,
                                       Mode mode);
  // Back-propagates dLoss/dOutput (device, [n, outputs]) of the last
  // kTrain Forward into grads(); `ready(offset)`, when given, is called
  // after each layer with parameters (gradients from offset on are final,
  // once the stream reaches this point).
  absl::Status Backward(const float* grad_output,
                        const std::function<void(int64_t)>& ready = nullptr);

  // The last Forward's output.
  const float* output() const { return output_; }
  // Every layer's running statistics (BatchNorm), in the CPU model's
  // Buffers() order: device pointer and element count.
  std::vector<std::pair<float*, int64_t>> buffers() const;

  float* params() const { return params_.data(); }
  float* grads() const { return grads_.data(); }
  int64_t flat_size() const { return flat_size_; }
  const Shape& output_shape() const { return output_shape_; }

  // Parameters and running statistics to and from a CPU model of the same
  // layout (synchronous).
  absl::Status CopyToCpu(Model<float>& cpu) const;
  absl::Status CopyFromCpu(Model<float>& cpu);

 private:
  GpuModel(GpuContext* context) : context_(context) {}
  absl::Status ReserveActivations(int64_t n);

  GpuContext* const context_;
  std::vector<std::unique_ptr<GpuLayer>> layers_;
  std::vector<int64_t> layer_offsets_;  // first parameter's offset, or -1
  std::vector<int64_t> out_sizes_;      // per-sample output size per layer
  Shape output_shape_;
  int64_t input_size_ = 0;
  int64_t flat_size_ = 0;
  DeviceFloats params_, grads_;
  std::vector<DeviceFloats> acts_;  // acts_[i]: output of layer i
  DeviceFloats grad_a_, grad_b_;    // ping-pong input gradients
  int64_t n_ = 0;
  const float* output_ = nullptr;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_GPU_MODEL_H_

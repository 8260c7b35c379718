// ConvTranspose2d on the GPU through cuDNN: the layer is the adjoint of the
// convolution from its output {OC, OH, OW} to its input {C, H, W} (same
// kernel, stride, padding, groups; weight {C, OC / G, K, K}, PyTorch's
// layout, which is that convolution's filter). So its forward pass is that
// convolution's backward-data, its input gradient the convolution's
// forward pass and its weight gradient the convolution's backward-filter
// with this layer's output gradient as the input and its input as the
// output gradient. output_padding is only the output descriptor's size:
// the convolution maps it back onto the same input size.
//
// Precision as GpuConv: float32 with FMA math, or bf16 copies of input and
// weight (kept for backward) with float32 accumulation; the bias stays
// float32.
//
// Ownership: parameters are views into the model's buffers (Bind); the
// layer owns its cuDNN descriptors and the bf16 copies. Thread safety:
// none; one thread drives a layer, on its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_CONV_TRANSPOSE_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_CONV_TRANSPOSE_H_

#include <cudnn.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_conv_algorithms.h"
#include "worker/gpu/layers/gpu_layer.h"
#include "worker/gpu/layers/gpu_layer_util.h"

namespace cohort {

struct GpuConvTransposeOptions {
  int64_t out_channels = 0;
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t output_padding = 0;  // < stride
  int64_t groups = 1;
  bool bias = true;
};

class GpuConvTranspose : public GpuLayer {
 public:
  GpuConvTranspose(const GpuConvTransposeOptions& options, bool bf16)
      : o_(options), bf16_(bf16) {}
  ~GpuConvTranspose() override;

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<int64_t> ParamSizes() const override;
  void Bind(const std::vector<float*>& v,
            const std::vector<float*>& g) override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  cudnnDataType_t DataType() const {
    return bf16_ ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  }
  int64_t WeightSize() const {
    return in_.c * (o_.out_channels / o_.groups) * o_.kernel * o_.kernel;
  }
  int64_t InSize() const { return in_.c * in_.h * in_.w; }
  int64_t OutSize() const { return o_.out_channels * oh_ * ow_; }

  absl::Status ForwardBf16(GpuContext& c, const float* in, float* out,
                           void* ws);
  absl::Status BackwardBf16(GpuContext& c, const float* dy, float* dx,
                            void* ws);
  // Descriptors and algorithms for batches of `n` (chosen once per size).
  absl::Status SetBatch(GpuContext& c, int64_t n);

  const GpuConvTransposeOptions o_;
  const bool bf16_;
  gpu_layers::Chw in_;
  int64_t oh_ = 0, ow_ = 0, n_ = -1;
  // The adjoint convolution, output -> input.
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  // This layer's input and output in its precision (the convolution's y
  // and x), its float32 output (bias) and the bias.
  gpu_layers::TensorDesc in_desc_, out_desc_, out32_desc_, b_desc_;
  gpu_layers::FilterDesc w_desc_;
  gpu_layers::ConvAlgorithms algo_;
  float *w_ = nullptr, *dw_ = nullptr, *b_ = nullptr, *db_ = nullptr;
  const float* in_ptr_ = nullptr;
  DeviceFloats x16_, w16_;  // bf16 copies kept from forward for backward
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_CONV_TRANSPOSE_H_

// Conv1d and Conv2d on the GPU through cuDNN; Conv1d runs as a 2-D
// convolution over a 1 x L image. Rectangular kernels and strides are the
// descriptor's; padding SAME with an odd total pads the input explicitly
// (cuDNN pads both sides of a dim alike).
//
// float32: FMA math, no TF32 (the CPU engine is the reference to 1e-5).
// bf16: cuDNN's pseudo-bf16 configuration (bf16 x, w and y, float32
// accumulation, tensor cores); the layer casts its float32 input and
// weights to bf16 copies kept for backward and casts the results (output,
// weight and input gradients) back to float32. The bias stays float32.
//
// Ownership: parameters are views into the model's buffers (Bind); the
// layer owns its cuDNN descriptors and the bf16 copies. Thread safety:
// none; one thread drives a layer, on its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_CONV_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_CONV_H_

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/conv_window.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_conv_algorithms.h"
#include "worker/gpu/layers/gpu_layer.h"
#include "worker/gpu/layers/gpu_layer_util.h"

namespace cohort {

class GpuConv : public GpuLayer {
 public:
  // `groups` and `dilation` as PyTorch's (cudnnSetConvolutionGroupCount,
  // the descriptor's dilation).
  GpuConv(int64_t out, int64_t kernel, int64_t stride, int64_t pad, bool bias,
          bool one_d, bool bf16, int64_t groups = 1, int64_t dilation = 1);
  // Conv2d with a window per dim (kernel_hw, stride_hw, padding_hw,
  // padding SAME).
  GpuConv(int64_t out, const ConvWindow& window, bool bias, bool bf16,
          int64_t groups);
  ~GpuConv() override;

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
  int64_t WeightSize() const { return out_ * (in_.c / groups_) * kh_ * kw_; }
  int64_t InSize() const { return in_.c * in_.h * in_.w; }
  // What cuDNN reads: the input with the extra rows and columns.
  bool Padded() const { return extra_h_ > 0 || extra_w_ > 0; }
  int64_t XSize() const {
    return in_.c * (in_.h + extra_h_) * (in_.w + extra_w_);
  }
  int64_t OutSize() const { return out_ * oh_ * ow_; }

  // The extra zero rows and columns (Padded): `in` copied into x_pad_, and
  // the input gradient cropped out of the padded one.
  absl::StatusOr<const float*> PadInput(GpuContext& c, const float* in,
                                        int64_t n);
  absl::Status CropGradient(GpuContext& c, const float* padded, float* dx,
                            int64_t n);
  absl::Status BackwardBf16(GpuContext& c, const float* dy, float* dx);
  // Descriptors and algorithms for batches of `n` (chosen once per size).
  absl::Status SetBatch(GpuContext& c, int64_t n);

  const int64_t out_, groups_;
  const bool bias_, one_d_, bf16_;
  // Per dim: kernel, stride and dilation; the padding cuDNN adds on both
  // sides of a dim; and, for padding SAME with an odd total, one more zero
  // row below or column right, which cuDNN cannot say and this layer adds
  // by copying the input into a larger zeroed buffer.
  int64_t kh_ = 1, kw_ = 1, sh_ = 1, sw_ = 1, dil_h_ = 1, dil_w_ = 1;
  int64_t ph_ = 0, pw_ = 0, extra_h_ = 0, extra_w_ = 0;
  gpu_layers::Chw in_;
  int64_t oh_ = 0, ow_ = 0, n_ = -1;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  // x and y in the layer's precision; y32 the float32 output (bias).
  gpu_layers::TensorDesc x_desc_, y_desc_, y32_desc_, b_desc_;
  gpu_layers::FilterDesc w_desc_;
  gpu_layers::ConvAlgorithms algo_;
  float *w_ = nullptr, *dw_ = nullptr, *b_ = nullptr, *db_ = nullptr;
  const float* in_ptr_ = nullptr;  // what cuDNN read: in, or x_pad_
  DeviceFloats x16_, w16_;         // bf16 copies kept from forward for backward
  DeviceFloats x_pad_, dx_pad_;    // Padded only
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_CONV_H_

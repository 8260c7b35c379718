// Conv1d and Conv2d on the GPU through cuDNN; Conv1d runs as a 2-D
// convolution over a 1 x L image.
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
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"
#include "worker/gpu/layers/gpu_layer_util.h"

namespace cohort {

class GpuConv : public GpuLayer {
 public:
  // `groups` and `dilation` as PyTorch's (cudnnSetConvolutionGroupCount,
  // the descriptor's dilation).
  GpuConv(int64_t out, int64_t kernel, int64_t stride, int64_t pad, bool bias,
          bool one_d, bool bf16, int64_t groups = 1, int64_t dilation = 1)
      : out_(out),
        k_(kernel),
        stride_(stride),
        pad_(pad),
        groups_(groups),
        dilation_(dilation),
        bias_(bias),
        one_d_(one_d),
        bf16_(bf16) {}
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
  // RAII owner of the cuDNN filter descriptor, created on first Set.
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

  cudnnDataType_t DataType() const {
    return bf16_ ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  }
  int64_t WeightSize() const {
    return out_ * (in_.c / groups_) * (one_d_ ? 1 : k_) * k_;
  }
  int64_t InSize() const { return in_.c * in_.h * in_.w; }
  int64_t OutSize() const { return out_ * oh_ * ow_; }

  absl::Status BackwardBf16(GpuContext& c, const float* dy, float* dx);
  // Descriptors and algorithms for batches of `n` (chosen once per size).
  absl::Status SetBatch(GpuContext& c, int64_t n);
  absl::Status ChooseAlgorithms(GpuContext& c);

  const int64_t out_, k_, stride_, pad_, groups_, dilation_;
  const bool bias_, one_d_, bf16_;
  gpu_layers::Chw in_;
  int64_t oh_ = 0, ow_ = 0, n_ = -1;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  // x and y in the layer's precision; y32 the float32 output (bias).
  gpu_layers::TensorDesc x_desc_, y_desc_, y32_desc_, b_desc_;
  FilterDesc w_desc_;
  cudnnConvolutionFwdAlgo_t fwd_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_{};
  size_t workspace_ = 0;
  float *w_ = nullptr, *dw_ = nullptr, *b_ = nullptr, *db_ = nullptr;
  const float* in_ptr_ = nullptr;
  DeviceFloats x16_, w16_;  // bf16 copies kept from forward for backward
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_CONV_H_

#include "worker/gpu/layers/gpu_activation.h"

#include "common/status_macros.h"
#include "common/tensor.h"

namespace cohort {

using gpu_layers::kOne;
using gpu_layers::kZero;

GpuRelu::~GpuRelu() {
  if (act_ != nullptr) cudnnDestroyActivationDescriptor(act_);
}

absl::StatusOr<Shape> GpuRelu::Configure(const Shape& in) {
  size_ = NumElements(in);
  RETURN_IF_ERROR(CudnnStatus(cudnnCreateActivationDescriptor(&act_),
                              "cudnnCreateActivationDescriptor"));
  RETURN_IF_ERROR(
      CudnnStatus(cudnnSetActivationDescriptor(act_, CUDNN_ACTIVATION_RELU,
                                               CUDNN_NOT_PROPAGATE_NAN, 0.0),
                  "relu descriptor"));
  return in;
}

absl::Status GpuRelu::Forward(GpuContext& c, const float* in, float* out,
                              int64_t n, Mode) {
  if (n != n_) {
    RETURN_IF_ERROR(desc_.Set(n, size_, 1, 1));
    n_ = n;
  }
  in_ = in;
  out_ = out;
  return CudnnStatus(cudnnActivationForward(c.cudnn(), act_, &kOne, desc_.get(),
                                            in, &kZero, desc_.get(), out),
                     "relu forward");
}

absl::Status GpuRelu::Backward(GpuContext& c, const float* dy, float* dx) {
  if (dx == nullptr) return absl::OkStatus();
  return CudnnStatus(cudnnActivationBackward(
                         c.cudnn(), act_, &kOne, desc_.get(), out_, desc_.get(),
                         dy, desc_.get(), in_, &kZero, desc_.get(), dx),
                     "relu backward");
}

}  // namespace cohort

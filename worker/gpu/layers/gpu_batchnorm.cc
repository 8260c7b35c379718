#include "worker/gpu/layers/gpu_batchnorm.h"

#include <cudnn.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"

namespace cohort {

using gpu_layers::kOne;
using gpu_layers::kZero;

std::string GpuBatchNorm::Name() const {
  return absl::StrCat(two_d_ ? "batchnorm2d(" : "batchnorm1d(", in_.c, ")");
}

absl::StatusOr<Shape> GpuBatchNorm::Configure(const Shape& in) {
  const bool fits =
      two_d_ ? in.size() == 3 : (in.size() == 1 || in.size() == 2);
  if (!fits || eps_ < CUDNN_BN_MIN_EPSILON) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": cannot take input ", ShapeString(in),
        " (or eps below cuDNN's minimum ", CUDNN_BN_MIN_EPSILON, ")"));
  }
  in_ = gpu_layers::AsChw(in);
  RETURN_IF_ERROR(stat_desc_.Set(1, in_.c, 1, 1));
  RETURN_IF_ERROR(running_mean_.Reserve(in_.c));
  RETURN_IF_ERROR(running_var_.Reserve(in_.c));
  RETURN_IF_ERROR(save_mean_.Reserve(in_.c));
  RETURN_IF_ERROR(save_invstd_.Reserve(in_.c));
  // Running mean 0, variance 1, as a fresh PyTorch layer.
  std::vector<float> zeros(in_.c, 0.0f), ones(in_.c, 1.0f);
  RETURN_IF_ERROR(CopyToDevice(running_mean_.data(), zeros.data(),
                               in_.c * sizeof(float),
                               "batchnorm running mean"));
  RETURN_IF_ERROR(CopyToDevice(running_var_.data(), ones.data(),
                               in_.c * sizeof(float),
                               "batchnorm running variance"));
  return in;
}

void GpuBatchNorm::Bind(const std::vector<float*>& v,
                        const std::vector<float*>& g) {
  gamma_ = v[0];
  beta_ = v[1];
  dgamma_ = g[0];
  dbeta_ = g[1];
}

std::vector<std::pair<float*, int64_t>> GpuBatchNorm::Buffers() {
  return {{running_mean_.data(), in_.c}, {running_var_.data(), in_.c}};
}

absl::Status GpuBatchNorm::Forward(GpuContext& c, const float* in, float* out,
                                   int64_t n, Mode mode) {
  if (n != n_) {
    RETURN_IF_ERROR(desc_.Set(n, in_.c, in_.h, in_.w));
    n_ = n;
  }
  in_ptr_ = in;
  if (mode == Mode::kEval) {
    return CudnnStatus(
        cudnnBatchNormalizationForwardInference(
            c.cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, desc_.get(), in,
            desc_.get(), out, stat_desc_.get(), gamma_, beta_,
            running_mean_.data(), running_var_.data(), eps_),
        absl::StrCat(Name(), " inference"));
  }
  return CudnnStatus(
      cudnnBatchNormalizationForwardTraining(
          c.cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, desc_.get(), in,
          desc_.get(), out, stat_desc_.get(), gamma_, beta_, momentum_,
          running_mean_.data(), running_var_.data(), eps_, save_mean_.data(),
          save_invstd_.data()),
      absl::StrCat(Name(), " forward"));
}

absl::Status GpuBatchNorm::Backward(GpuContext& c, const float* dy, float* dx) {
  // cuDNN always computes the input gradient; the first layer gets a
  // scratch buffer.
  float* target = dx;
  if (target == nullptr) {
    RETURN_IF_ERROR(scratch_.Reserve(n_ * in_.c * in_.h * in_.w));
    target = scratch_.data();
  }
  return CudnnStatus(cudnnBatchNormalizationBackward(
                         c.cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero,
                         &kOne, &kZero, desc_.get(), in_ptr_, desc_.get(), dy,
                         desc_.get(), target, stat_desc_.get(), gamma_, dgamma_,
                         dbeta_, eps_, save_mean_.data(), save_invstd_.data()),
                     absl::StrCat(Name(), " backward"));
}

}  // namespace cohort

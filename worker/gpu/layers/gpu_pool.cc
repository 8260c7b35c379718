#include "worker/gpu/layers/gpu_pool.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace cohort {

using gpu_layers::kOne;
using gpu_layers::kZero;

GpuPool::~GpuPool() {
  if (pool_ != nullptr) cudnnDestroyPoolingDescriptor(pool_);
}

std::string GpuPool::Name() const {
  switch (kind_) {
    case Kind::kMax:
      return absl::StrCat("maxpool2d(k", k_, ")");
    case Kind::kAvg:
      return absl::StrCat("avgpool2d(k", k_, ")");
    default:
      return "global_avgpool";
  }
}

absl::StatusOr<Shape> GpuPool::Configure(const Shape& in) {
  if (in.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": expects {channels, height, width}, got ", ShapeString(in)));
  }
  in_ = gpu_layers::AsChw(in);
  int64_t kh = k_, kw = k_, sh = stride_, sw = stride_, p = pad_;
  if (kind_ == Kind::kGlobalAvg) {
    kh = sh = in_.h;
    kw = sw = in_.w;
    p = 0;
  }
  if (kh < 1 || sh < 1 || p < 0 || 2 * p > kh) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": bad kernel, stride or padding"));
  }
  oh_ = (in_.h + 2 * p - kh) / sh + 1;
  ow_ = (in_.w + 2 * p - kw) / sw + 1;
  if (oh_ < 1 || ow_ < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": input ", ShapeString(in), " is smaller than the window"));
  }
  RETURN_IF_ERROR(CudnnStatus(cudnnCreatePoolingDescriptor(&pool_),
                              "cudnnCreatePoolingDescriptor"));
  const cudnnPoolingMode_t mode =
      kind_ == Kind::kMax ? CUDNN_POOLING_MAX_DETERMINISTIC
                          : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
  RETURN_IF_ERROR(CudnnStatus(
      cudnnSetPooling2dDescriptor(pool_, mode, CUDNN_NOT_PROPAGATE_NAN, kh, kw,
                                  p, p, sh, sw),
      "pooling descriptor"));
  if (kind_ == Kind::kGlobalAvg) return Shape{in_.c};
  return Shape{in_.c, oh_, ow_};
}

absl::Status GpuPool::Forward(GpuContext& c, const float* in, float* out,
                              int64_t n, Mode) {
  if (n != n_) {
    RETURN_IF_ERROR(x_desc_.Set(n, in_.c, in_.h, in_.w));
    RETURN_IF_ERROR(y_desc_.Set(n, in_.c, oh_, ow_));
    n_ = n;
  }
  in_ptr_ = in;
  out_ptr_ = out;
  return CudnnStatus(cudnnPoolingForward(c.cudnn(), pool_, &kOne, x_desc_.get(),
                                         in, &kZero, y_desc_.get(), out),
                     absl::StrCat(Name(), " forward"));
}

absl::Status GpuPool::Backward(GpuContext& c, const float* dy, float* dx) {
  if (dx == nullptr) return absl::OkStatus();
  return CudnnStatus(
      cudnnPoolingBackward(c.cudnn(), pool_, &kOne, y_desc_.get(), out_ptr_,
                           y_desc_.get(), dy, x_desc_.get(), in_ptr_, &kZero,
                           x_desc_.get(), dx),
      absl::StrCat(Name(), " backward"));
}

}  // namespace cohort

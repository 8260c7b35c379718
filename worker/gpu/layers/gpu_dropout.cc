#include "worker/gpu/layers/gpu_dropout.h"

#include "absl/strings/str_cat.h"
#include "common/tensor.h"
#include "kernels/cuda/ops.h"
#include "worker/gpu/layers/gpu_layer_util.h"

namespace cohort {

using gpu_layers::CopyOnDevice;

std::string GpuDropout::Name() const {
  return absl::StrCat("dropout(", p_, ")");
}

absl::StatusOr<Shape> GpuDropout::Configure(const Shape& in) {
  if (!(p_ >= 0.0 && p_ < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": p must be in [0, 1)"));
  }
  size_ = NumElements(in);
  return in;
}

absl::Status GpuDropout::Forward(GpuContext& c, const float* in, float* out,
                                 int64_t n, Mode mode) {
  count_ = n * size_;
  train_ = mode == Mode::kTrain && p_ > 0;
  if (!train_) return CopyOnDevice(c, out, in, count_);
  offset_ = next_offset_;
  next_offset_ += count_;
  return gpu::DropoutForward(in, out, nullptr, count_, p_, seed_, offset_,
                             c.stream());
}

absl::Status GpuDropout::Backward(GpuContext& c, const float* dy, float* dx) {
  if (dx == nullptr) return absl::OkStatus();
  if (!train_) return CopyOnDevice(c, dx, dy, count_);
  return gpu::DropoutBackward(dy, dx, count_, p_, seed_, offset_, c.stream());
}

}  // namespace cohort

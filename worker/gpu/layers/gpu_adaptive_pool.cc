#include "worker/gpu/layers/gpu_adaptive_pool.h"

#include "absl/strings/str_cat.h"

namespace cohort {

std::string GpuAdaptiveAvgPool2d::Name() const {
  return absl::StrCat("adaptive_avgpool2d(", output_, ")");
}

absl::StatusOr<Shape> GpuAdaptiveAvgPool2d::Configure(const Shape& in) {
  if (in.size() != 3 || output_ < 1 || in[0] < 1 || in[1] < 1 || in[2] < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": does not fit the per-sample input ", ShapeString(in)));
  }
  channels_ = in[0];
  shape_.in_h = in[1];
  shape_.in_w = in[2];
  shape_.out_h = shape_.out_w = output_;
  return Shape{channels_, output_, output_};
}

absl::Status GpuAdaptiveAvgPool2d::Forward(GpuContext& c, const float* in,
                                           float* out, int64_t n, Mode) {
  shape_.planes = n * channels_;
  return gpu::AdaptiveAvgPool2dForward(shape_, in, out, c.stream());
}

absl::Status GpuAdaptiveAvgPool2d::Backward(GpuContext& c, const float* dy,
                                            float* dx) {
  if (dx == nullptr) return absl::OkStatus();
  return gpu::AdaptiveAvgPool2dBackward(shape_, dy, dx, c.stream());
}

}  // namespace cohort

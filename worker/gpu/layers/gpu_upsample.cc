#include "worker/gpu/layers/gpu_upsample.h"

#include "absl/strings/str_cat.h"

namespace cohort {

std::string GpuUpsample::Name() const {
  return absl::StrCat("upsample(", scale_,
                      bilinear_ ? ", bilinear)" : ", nearest)");
}

absl::StatusOr<Shape> GpuUpsample::Configure(const Shape& in) {
  if (in.size() != 3 || scale_ < 1 || in[0] < 1 || in[1] < 1 || in[2] < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": does not fit the per-sample input ", ShapeString(in)));
  }
  channels_ = in[0];
  shape_.in_h = in[1];
  shape_.in_w = in[2];
  shape_.scale = scale_;
  shape_.bilinear = bilinear_;
  return Shape{channels_, in[1] * scale_, in[2] * scale_};
}

absl::Status GpuUpsample::Forward(GpuContext& c, const float* in, float* out,
                                  int64_t n, Mode) {
  shape_.planes = n * channels_;
  return gpu::UpsampleForward(shape_, in, out, c.stream());
}

absl::Status GpuUpsample::Backward(GpuContext& c, const float* dy, float* dx) {
  if (dx == nullptr) return absl::OkStatus();
  return gpu::UpsampleBackward(shape_, dy, dx, c.stream());
}

}  // namespace cohort

#include "worker/gpu/layers/gpu_pool1d.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace cohort {

static_assert(sizeof(int32_t) == sizeof(float), "argmax in float slots");

GpuPool1d::GpuPool1d(bool max, int64_t kernel, int64_t stride, int64_t padding)
    : max_(max) {
  shape_.kernel = kernel;
  shape_.stride = stride > 0 ? stride : kernel;
  shape_.padding = padding;
}

std::string GpuPool1d::Name() const {
  return absl::StrCat(max_ ? "maxpool1d" : "avgpool1d", "(k", shape_.kernel,
                      ", s", shape_.stride, ", p", shape_.padding, ")");
}

absl::StatusOr<Shape> GpuPool1d::Configure(const Shape& in) {
  const int64_t k = shape_.kernel, p = shape_.padding;
  if (in.size() != 2 || k < 1 || p < 0 || 2 * p > k || in[1] + 2 * p < k) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": does not fit the per-sample input ", ShapeString(in)));
  }
  channels_ = in[0];
  shape_.in_l = in[1];
  shape_.out_l = (in[1] + 2 * p - k) / shape_.stride + 1;
  return Shape{channels_, shape_.out_l};
}

absl::Status GpuPool1d::Forward(GpuContext& c, const float* in, float* out,
                                int64_t n, Mode) {
  shape_.planes = n * channels_;
  if (!max_) return gpu::AvgPool1dForward(shape_, in, out, c.stream());
  RETURN_IF_ERROR(argmax_.Reserve(shape_.planes * shape_.out_l));
  return gpu::MaxPool1dForward(
      shape_, in, out, reinterpret_cast<int32_t*>(argmax_.data()), c.stream());
}

absl::Status GpuPool1d::Backward(GpuContext& c, const float* dy, float* dx) {
  if (dx == nullptr) return absl::OkStatus();
  if (!max_) return gpu::AvgPool1dBackward(shape_, dy, dx, c.stream());
  return gpu::MaxPool1dBackward(
      shape_, dy, reinterpret_cast<const int32_t*>(argmax_.data()), dx,
      c.stream());
}

}  // namespace cohort

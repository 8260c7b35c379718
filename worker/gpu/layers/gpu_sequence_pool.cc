#include "worker/gpu/layers/gpu_sequence_pool.h"

#include "absl/strings/str_cat.h"
#include "common/tensor.h"

namespace cohort {

absl::StatusOr<Shape> GpuSequencePool::Configure(const Shape& in) {
  if (in.size() != 2 || NumElements(in) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": expects a non-empty sequence {features, length}, got ",
        ShapeString(in)));
  }
  return pool_.Configure({in[0], 1, in[1]});
}

absl::Status GpuSequencePool::Forward(GpuContext& c, const float* in,
                                      float* out, int64_t n, Mode mode) {
  return pool_.Forward(c, in, out, n, mode);
}

absl::Status GpuSequencePool::Backward(GpuContext& c, const float* dy,
                                       float* dx) {
  return pool_.Backward(c, dy, dx);
}

}  // namespace cohort

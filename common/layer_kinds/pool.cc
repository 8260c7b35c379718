// maxpool2d, avgpool2d, maxpool1d and avgpool1d: nn.MaxPool2d,
// nn.AvgPool2d (padding counted in the average, as PyTorch's default) and
// their 1-D forms over {C, L} samples, one PoolSpec for all four.
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/layer_kind.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

using shape_inference::Positions;
using shape_inference::Unfit;
using spec_internal::NonNegative;
using spec_internal::Positive;
using spec_internal::Require;
using spec_internal::Scope;

absl::Status CheckPool(const PoolSpec& p, const Scope& s) {
  RETURN_IF_ERROR(Positive(s, p, "kernel", p.kernel()));
  RETURN_IF_ERROR(NonNegative(s, p, "stride", p.stride()));
  RETURN_IF_ERROR(NonNegative(s, p, "padding", p.padding()));
  // PyTorch's rule: otherwise a window could lie entirely in the padding.
  return Require(p.padding() <= p.kernel() / 2, s, p, "padding",
                 absl::StrCat("<= kernel / 2 (", p.kernel() / 2, ")"),
                 p.padding());
}

void FillPool(PoolSpec* p) {
  if (p->stride() == 0) p->set_stride(p->kernel());
}

// The fields alone, before any input is known.
absl::Status CheckPoolFields(const PoolSpec& p) {
  if (p.kernel() < 1 || p.stride() < 0 || p.padding() < 0 ||
      2 * int64_t{p.padding()} > p.kernel()) {
    return Unfit(absl::StrCat(
        "kernel must be at least 1, stride not negative and padding in "
        "[0, kernel / 2], got ",
        p.kernel(), ", ", p.stride(), " and ", p.padding()));
  }
  return absl::OkStatus();
}

absl::StatusOr<InferredLayer> InferPool2d(const PoolSpec& p, const Shape& in) {
  const int64_t stride = p.stride() > 0 ? p.stride() : p.kernel();
  RETURN_IF_ERROR(CheckPoolFields(p));
  if (in.size() != 3) return Unfit("it expects a per-sample input [C, H, W]");
  // The pooling kernels index a plane with int32.
  if (CheckedInt(in[1]) * in[2] >
      CheckedInt(std::numeric_limits<int32_t>::max())) {
    return Unfit("an input plane is too large for int32 indices");
  }
  InferredLayer r;
  r.output = {in[0]};
  for (int d = 1; d <= 2; ++d) {
    const CheckedInt padded = CheckedInt(in[d]) + CheckedInt(2) * p.padding();
    if (padded < CheckedInt(p.kernel())) {
      return Unfit(absl::StrCat("the kernel ", p.kernel(),
                                " does not fit the padded input"));
    }
    r.output.push_back(Positions(padded, p.kernel(), stride));
  }
  return r;
}

absl::StatusOr<InferredLayer> InferPool1d(const PoolSpec& p, const Shape& in) {
  const int64_t stride = p.stride() > 0 ? p.stride() : p.kernel();
  RETURN_IF_ERROR(CheckPoolFields(p));
  if (in.size() != 2) return Unfit("it expects a per-sample input [C, L]");
  if (in[1] > std::numeric_limits<int32_t>::max()) {
    return Unfit("an input row is too long for int32 indices");
  }
  const CheckedInt padded = CheckedInt(in[1]) + CheckedInt(2) * p.padding();
  if (padded < CheckedInt(p.kernel())) {
    return Unfit(absl::StrCat("the kernel ", p.kernel(),
                              " does not fit the padded input"));
  }
  InferredLayer r;
  r.output = {in[0], Positions(padded, p.kernel(), stride)};
  return r;
}

absl::Status CheckMaxPool2d(const LayerSpec& l, const Scope& s) {
  return CheckPool(l.maxpool2d(), s);
}
void FillMaxPool2d(LayerSpec* l) { FillPool(l->mutable_maxpool2d()); }
absl::StatusOr<InferredLayer> InferMaxPool2d(const LayerSpec& l,
                                             const Shape& in) {
  return InferPool2d(l.maxpool2d(), in);
}

absl::Status CheckAvgPool2d(const LayerSpec& l, const Scope& s) {
  return CheckPool(l.avgpool2d(), s);
}
void FillAvgPool2d(LayerSpec* l) { FillPool(l->mutable_avgpool2d()); }
absl::StatusOr<InferredLayer> InferAvgPool2d(const LayerSpec& l,
                                             const Shape& in) {
  return InferPool2d(l.avgpool2d(), in);
}

absl::Status CheckMaxPool1d(const LayerSpec& l, const Scope& s) {
  return CheckPool(l.maxpool1d(), s);
}
void FillMaxPool1d(LayerSpec* l) { FillPool(l->mutable_maxpool1d()); }
absl::StatusOr<InferredLayer> InferMaxPool1d(const LayerSpec& l,
                                             const Shape& in) {
  return InferPool1d(l.maxpool1d(), in);
}

absl::Status CheckAvgPool1d(const LayerSpec& l, const Scope& s) {
  return CheckPool(l.avgpool1d(), s);
}
void FillAvgPool1d(LayerSpec* l) { FillPool(l->mutable_avgpool1d()); }
absl::StatusOr<InferredLayer> InferAvgPool1d(const LayerSpec& l,
                                             const Shape& in) {
  return InferPool1d(l.avgpool1d(), in);
}

const LayerKind kMaxPool2d = {"maxpool2d", CheckMaxPool2d, FillMaxPool2d,
                              InferMaxPool2d};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kMaxpool2D, kMaxPool2d);
const LayerKind kAvgPool2d = {"avgpool2d", CheckAvgPool2d, FillAvgPool2d,
                              InferAvgPool2d};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kAvgpool2D, kAvgPool2d);
const LayerKind kMaxPool1d = {"maxpool1d", CheckMaxPool1d, FillMaxPool1d,
                              InferMaxPool1d};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kMaxpool1D, kMaxPool1d);
const LayerKind kAvgPool1d = {"avgpool1d", CheckAvgPool1d, FillAvgPool1d,
                              InferAvgPool1d};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kAvgpool1D, kAvgPool1d);

}  // namespace
}  // namespace cohort

// conv1d and conv2d: nn.Conv1d over {C, L} samples, nn.Conv2d over
// {C, H, W} samples, one ConvSpec for both.
#include <algorithm>
#include <string>

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

absl::Status CheckConv(const ConvSpec& c, const Scope& s) {
  RETURN_IF_ERROR(Positive(s, c, "out_channels", c.out_channels()));
  RETURN_IF_ERROR(Positive(s, c, "kernel", c.kernel()));
  RETURN_IF_ERROR(NonNegative(s, c, "stride", c.stride()));
  RETURN_IF_ERROR(NonNegative(s, c, "padding", c.padding()));
  RETURN_IF_ERROR(NonNegative(s, c, "groups", c.groups()));
  RETURN_IF_ERROR(NonNegative(s, c, "dilation", c.dilation()));
  // The input channels are known only to the shape inference, which checks
  // that groups divides them too.
  const int groups = std::max(c.groups(), 1);
  return Require(
      c.out_channels() % groups == 0, s, c, "groups",
      absl::StrCat("a divisor of out_channels (", c.out_channels(), ")"),
      c.groups());
}

void FillConv(ConvSpec* c) {
  if (c->stride() == 0) c->set_stride(1);
}

absl::StatusOr<InferredLayer> InferConv(const ConvSpec& c, int dims,
                                        const Shape& in) {
  const int64_t stride = c.stride() > 0 ? c.stride() : 1;
  const int64_t groups = c.groups() > 0 ? c.groups() : 1;
  const int64_t dilation = c.dilation() > 0 ? c.dilation() : 1;
  if (c.out_channels() <= 0 || c.kernel() <= 0 || c.stride() < 0 ||
      c.padding() < 0 || c.groups() < 0 || c.dilation() < 0) {
    return Unfit(absl::StrCat(
        "out_channels and kernel must be positive and stride, padding, "
        "groups and dilation not negative, got ",
        c.out_channels(), ", ", c.kernel(), ", ", c.stride(), ", ", c.padding(),
        ", ", c.groups(), " and ", c.dilation()));
  }
  if (in.size() != static_cast<size_t>(dims) + 1) {
    return Unfit(absl::StrCat("it expects a per-sample input ",
                              dims == 2 ? "{C, H, W}" : "{C, L}"));
  }
  if (in[0] % groups != 0 || c.out_channels() % groups != 0) {
    return Unfit(absl::StrCat("groups ", groups, " must divide the ", in[0],
                              " input and ", c.out_channels(),
                              " output channels"));
  }
  // The dilated kernel's extent; kernel and dilation are int32.
  const int64_t span = dilation * (int64_t{c.kernel()} - 1) + 1;
  InferredLayer r;
  r.output = {c.out_channels()};
  for (size_t d = 1; d < in.size(); ++d) {
    const CheckedInt padded = CheckedInt(in[d]) + CheckedInt(2) * c.padding();
    if (padded < CheckedInt(span)) {
      return Unfit(absl::StrCat("the input padded by ", c.padding(),
                                " is smaller than the kernel ", c.kernel(),
                                dilation > 1
                                    ? absl::StrCat(" dilated by ", dilation)
                                    : std::string()));
    }
    r.output.push_back(Positions(padded, span, stride));
  }
  CheckedInt weight = CheckedInt(c.out_channels()) * (in[0] / groups);
  for (int d = 0; d < dims; ++d) weight *= c.kernel();
  r.params.push_back(weight);
  if (!c.no_bias()) r.params.push_back(c.out_channels());
  return r;
}

absl::Status CheckConv1d(const LayerSpec& l, const Scope& s) {
  return CheckConv(l.conv1d(), s);
}
void FillConv1d(LayerSpec* l) { FillConv(l->mutable_conv1d()); }
absl::StatusOr<InferredLayer> InferConv1d(const LayerSpec& l, const Shape& in) {
  return InferConv(l.conv1d(), 1, in);
}

absl::Status CheckConv2d(const LayerSpec& l, const Scope& s) {
  return CheckConv(l.conv2d(), s);
}
void FillConv2d(LayerSpec* l) { FillConv(l->mutable_conv2d()); }
absl::StatusOr<InferredLayer> InferConv2d(const LayerSpec& l, const Shape& in) {
  return InferConv(l.conv2d(), 2, in);
}

const LayerKind kConv1d = {"conv1d", CheckConv1d, FillConv1d, InferConv1d};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kConv1D, kConv1d);
const LayerKind kConv2d = {"conv2d", CheckConv2d, FillConv2d, InferConv2d};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kConv2D, kConv2d);

}  // namespace
}  // namespace cohort

// conv_transpose2d: nn.ConvTranspose2d over {C, H, W} samples (dilation
// 1), the adjoint of a conv2d with the same kernel, stride and padding:
// {C, H, W} -> {out_channels, H', W'} with
// H' = (H - 1) * stride - 2 * padding + kernel + output_padding.
// Weight {C, out_channels / groups, K, K} as PyTorch's, bias
// {out_channels}.
#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/layer_kind.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

using shape_inference::Unfit;
using spec_internal::NonNegative;
using spec_internal::Positive;
using spec_internal::Require;
using spec_internal::Scope;

absl::Status CheckConvTranspose(const LayerSpec& l, const Scope& s) {
  const ConvTransposeSpec& c = l.conv_transpose2d();
  RETURN_IF_ERROR(Positive(s, c, "out_channels", c.out_channels()));
  RETURN_IF_ERROR(Positive(s, c, "kernel", c.kernel()));
  RETURN_IF_ERROR(NonNegative(s, c, "stride", c.stride()));
  RETURN_IF_ERROR(NonNegative(s, c, "padding", c.padding()));
  RETURN_IF_ERROR(NonNegative(s, c, "output_padding", c.output_padding()));
  // output_padding picks one of the `stride` output sizes that the same
  // convolution maps back onto the input size; more would add rows that
  // no input position reaches (PyTorch refuses it too).
  const int stride = std::max(c.stride(), 1);
  RETURN_IF_ERROR(Require(c.output_padding() < stride, s, c, "output_padding",
                          absl::StrCat("< stride (", stride, ")"),
                          c.output_padding()));
  RETURN_IF_ERROR(NonNegative(s, c, "groups", c.groups()));
  const int groups = std::max(c.groups(), 1);
  return Require(
      c.out_channels() % groups == 0, s, c, "groups",
      absl::StrCat("a divisor of out_channels (", c.out_channels(), ")"),
      c.groups());
}

void FillConvTranspose(LayerSpec* l) {
  ConvTransposeSpec* c = l->mutable_conv_transpose2d();
  if (c->stride() == 0) c->set_stride(1);
}

absl::StatusOr<InferredLayer> InferConvTranspose(const LayerSpec& l,
                                                 const Shape& in) {
  const ConvTransposeSpec& c = l.conv_transpose2d();
  const int64_t stride = c.stride() > 0 ? c.stride() : 1;
  const int64_t groups = c.groups() > 0 ? c.groups() : 1;
  if (c.out_channels() <= 0 || c.kernel() <= 0 || c.stride() < 0 ||
      c.padding() < 0 || c.output_padding() < 0 ||
      c.output_padding() >= stride || c.groups() < 0) {
    return Unfit(absl::StrCat(
        "out_channels and kernel must be positive, stride, padding and "
        "groups not negative and output_padding in [0, stride), got ",
        c.out_channels(), ", ", c.kernel(), ", ", c.stride(), ", ", c.padding(),
        ", ", c.groups(), " and ", c.output_padding()));
  }
  if (in.size() != 3) return Unfit("it expects a per-sample input {C, H, W}");
  if (in[0] % groups != 0 || c.out_channels() % groups != 0) {
    return Unfit(absl::StrCat("groups ", groups, " must divide the ", in[0],
                              " input and ", c.out_channels(),
                              " output channels"));
  }
  InferredLayer r;
  r.output = {c.out_channels()};
  for (int d = 1; d <= 2; ++d) {
    // CheckedInt holds sizes, not differences: the padding comes off last.
    const CheckedInt grown =
        CheckedInt(in[d] - 1) * stride + c.kernel() + c.output_padding();
    const int64_t cropped = 2 * int64_t{c.padding()};
    if (grown < CheckedInt(cropped + 1)) {
      return Unfit(absl::StrCat("padding ", c.padding(), " on each side of ",
                                grown.value(),
                                " output positions leaves none"));
    }
    r.output.push_back(grown.overflow() ? grown
                                        : CheckedInt(grown.value() - cropped));
  }
  r.params.push_back(CheckedInt(in[0]) * (c.out_channels() / groups) *
                     c.kernel() * c.kernel());
  if (!c.no_bias()) r.params.push_back(c.out_channels());
  return r;
}

const LayerKind kConvTranspose2d = {"conv_transpose2d", CheckConvTranspose,
                                    FillConvTranspose, InferConvTranspose};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kConvTranspose2D, kConvTranspose2d);

}  // namespace
}  // namespace cohort

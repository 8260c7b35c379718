// conv1d and conv2d: nn.Conv1d over {C, L} samples, nn.Conv2d over
// {C, H, W} samples, one ConvSpec for both; conv2d alone takes rectangular
// windows and padding SAME (common/conv_window.h resolves them).
#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/conv_window.h"
#include "common/layer_kind.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

using shape_inference::Positions;
using shape_inference::Unfit;
using spec_internal::NonNegative;
using spec_internal::OnlyFor;
using spec_internal::Positive;
using spec_internal::Require;
using spec_internal::Scope;

// A [height, width] field: empty, or two values each > 0 (>= 0 with
// `zero_ok`).
absl::Status CheckPair(const Scope& s, const ConvSpec& c,
                       absl::string_view field,
                       const google::protobuf::RepeatedField<int32_t>& v,
                       bool zero_ok) {
  if (v.empty()) return absl::OkStatus();
  if (v.size() != 2) {
    return s.Error(c, field, -1,
                   absl::StrCat("must list two values [height, width], got ",
                                v.size(), ": [", absl::StrJoin(v, ", "), "]"));
  }
  for (int i = 0; i < 2; ++i) {
    if (v[i] > 0 || (zero_ok && v[i] == 0)) continue;
    return s.Error(
        c, field, i,
        absl::StrCat("must be ", zero_ok ? ">= 0" : "> 0", ", got ", v[i]));
  }
  return absl::OkStatus();
}

// A square field and its [height, width] form never come together: one
// would silently win.
absl::Status NotBoth(const Scope& s, const ConvSpec& c, absl::string_view field,
                     int32_t square, absl::string_view hw_field, bool hw_set) {
  if (!hw_set || square == 0) return absl::OkStatus();
  return Require(
      false, s, c, field,
      absl::StrCat("unset when ", hw_field, " lists [height, width]"), square);
}

// padding_mode SAME's companions: stride 1 (PyTorch refuses padding="same"
// with strides, whose output would not keep the input's size) and no
// explicit padding, which SAME computes.
absl::Status CheckSame(const ConvSpec& c, const Scope& s) {
  const absl::string_view same_rule =
      "1 with padding_mode SAME (PyTorch's padding=\"same\")";
  if (!c.stride_hw().empty()) {
    RETURN_IF_ERROR(
        Require(c.stride_hw(0) == 1 && c.stride_hw(1) == 1, s, c, "stride_hw",
                absl::StrCat("[1, 1]", same_rule.substr(1)),
                absl::StrCat("[", absl::StrJoin(c.stride_hw(), ", "), "]")));
  }
  RETURN_IF_ERROR(
      Require(c.stride() <= 1, s, c, "stride", same_rule, c.stride()));
  RETURN_IF_ERROR(Require(c.padding() == 0, s, c, "padding",
                          "0 with padding_mode SAME, which computes it",
                          c.padding()));
  return Require(c.padding_hw().empty(), s, c, "padding_hw",
                 "empty with padding_mode SAME, which computes it",
                 absl::StrCat("[", absl::StrJoin(c.padding_hw(), ", "), "]"));
}

// conv2d's rectangular fields and padding SAME. conv1d takes none of them.
absl::Status CheckConv2dFields(const ConvSpec& c, const Scope& s, int dims) {
  if (dims == 1) {
    for (const auto& [field, set] :
         {std::pair<absl::string_view, bool>{"kernel_hw",
                                             !c.kernel_hw().empty()},
          {"stride_hw", !c.stride_hw().empty()},
          {"padding_hw", !c.padding_hw().empty()},
          {"padding_mode", c.padding_mode() != ConvSpec::EXPLICIT}}) {
      RETURN_IF_ERROR(OnlyFor(false, set, s, c, field, "conv2d", "conv1d"));
    }
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CheckPair(s, c, "kernel_hw", c.kernel_hw(), false));
  RETURN_IF_ERROR(CheckPair(s, c, "stride_hw", c.stride_hw(), false));
  RETURN_IF_ERROR(CheckPair(s, c, "padding_hw", c.padding_hw(), true));
  RETURN_IF_ERROR(
      NotBoth(s, c, "kernel", c.kernel(), "kernel_hw", !c.kernel_hw().empty()));
  RETURN_IF_ERROR(
      NotBoth(s, c, "stride", c.stride(), "stride_hw", !c.stride_hw().empty()));
  RETURN_IF_ERROR(NotBoth(s, c, "padding", c.padding(), "padding_hw",
                          !c.padding_hw().empty()));
  if (c.padding_mode() != ConvSpec::SAME) return absl::OkStatus();
  return CheckSame(c, s);
}

absl::Status CheckConv(const ConvSpec& c, const Scope& s, int dims) {
  RETURN_IF_ERROR(Positive(s, c, "out_channels", c.out_channels()));
  RETURN_IF_ERROR(CheckConv2dFields(c, s, dims));
  if (c.kernel_hw().empty()) {
    RETURN_IF_ERROR(Positive(s, c, "kernel", c.kernel()));
  }
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
  if (c->stride() == 0 && c->stride_hw().empty()) c->set_stride(1);
}

// "padded by 1", or "padded by 1 and 2" where the sides differ (SAME).
std::string PaddedBy(int64_t before, int64_t after) {
  if (before == after) return absl::StrCat("padded by ", before);
  return absl::StrCat("padded by ", before, " and ", after);
}

// Whether `in` and the sizes fit before the window is applied.
absl::Status CheckFits(const ConvSpec& c, const ConvWindow& w, int dims,
                       const Shape& in) {
  const int64_t groups = c.groups() > 0 ? c.groups() : 1;
  if (c.out_channels() <= 0 || w.kernel_h <= 0 || w.kernel_w <= 0 ||
      w.stride_h <= 0 || w.stride_w <= 0 || c.stride() < 0 || w.pad_top < 0 ||
      w.pad_left < 0 || c.groups() < 0 || c.dilation() < 0) {
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
  return absl::OkStatus();
}

absl::StatusOr<InferredLayer> InferConv(const ConvSpec& c, int dims,
                                        const Shape& in) {
  const ConvWindow w = ResolveConvWindow(c, dims);
  RETURN_IF_ERROR(CheckFits(c, w, dims, in));
  const int64_t groups = c.groups() > 0 ? c.groups() : 1;
  // Per spatial dim (height first for 2-D): kernel, stride, padding.
  const int64_t kernel[2] = {w.kernel_h, w.kernel_w};
  const int64_t stride[2] = {w.stride_h, w.stride_w};
  const int64_t before[2] = {w.pad_top, w.pad_left};
  const int64_t after[2] = {w.pad_bottom, w.pad_right};
  InferredLayer r;
  r.output = {c.out_channels()};
  CheckedInt weight = CheckedInt(c.out_channels()) * (in[0] / groups);
  for (int d = 2 - dims; d < 2; ++d) {
    // The dilated kernel's extent; kernel and dilation are int32.
    const int64_t span = w.dilation * (kernel[d] - 1) + 1;
    const CheckedInt padded = CheckedInt(in[d - 1 + dims]) +
                              CheckedInt(before[d]) + CheckedInt(after[d]);
    if (padded < CheckedInt(span)) {
      return Unfit(absl::StrCat("the input ", PaddedBy(before[d], after[d]),
                                " is smaller than the kernel ", kernel[d],
                                w.dilation > 1
                                    ? absl::StrCat(" dilated by ", w.dilation)
                                    : std::string()));
    }
    r.output.push_back(Positions(padded, span, stride[d]));
    weight *= kernel[d];
  }
  r.params.push_back(weight);
  if (!c.no_bias()) r.params.push_back(c.out_channels());
  return r;
}

absl::Status CheckConv1d(const LayerSpec& l, const Scope& s) {
  return CheckConv(l.conv1d(), s, 1);
}
void FillConv1d(LayerSpec* l) { FillConv(l->mutable_conv1d()); }
absl::StatusOr<InferredLayer> InferConv1d(const LayerSpec& l, const Shape& in) {
  return InferConv(l.conv1d(), 1, in);
}

absl::Status CheckConv2d(const LayerSpec& l, const Scope& s) {
  return CheckConv(l.conv2d(), s, 2);
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

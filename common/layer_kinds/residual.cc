// residual: torchvision's BasicBlock (or Bottleneck) with its shortcut, a
// 1x1 convolution and BatchNorm when the shape changes
// (worker/layers/residual.h).
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/layer_kind.h"
#include "common/residual_branch.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

using shape_inference::Checked;
using shape_inference::InferLayer;
using shape_inference::Unfit;
using spec_internal::NonNegative;
using spec_internal::Positive;
using spec_internal::Require;
using spec_internal::Scope;

absl::Status CheckResidual(const LayerSpec& l, const Scope& s) {
  const ResidualSpec& r = l.residual();
  RETURN_IF_ERROR(Positive(s, r, "out_channels", r.out_channels()));
  // The bottleneck's inner convolutions have out_channels / 4.
  RETURN_IF_ERROR(Require(
      !r.bottleneck() || r.out_channels() % 4 == 0, s, r, "out_channels",
      "a multiple of 4 with bottleneck: true", r.out_channels()));
  return NonNegative(s, r, "stride", r.stride());
}

void FillResidual(LayerSpec* l) {
  if (l->residual().stride() == 0) l->mutable_residual()->set_stride(1);
}

// Runs `chain` from *shape, appending its parameters and activations.
absl::Status AddChain(
    const google::protobuf::RepeatedPtrField<LayerSpec>& chain, Shape* shape,
    InferredLayer* out) {
  for (const LayerSpec& l : chain) {
    ASSIGN_OR_RETURN(const LayerSizes s, InferLayer(l, *shape));
    out->params.insert(out->params.end(), s.param_tensors.begin(),
                       s.param_tensors.end());
    out->no_decay.insert(out->no_decay.end(), s.param_no_decay.begin(),
                         s.param_no_decay.end());
    *out->activations += s.activations;
    *shape = s.output;
  }
  return absl::OkStatus();
}

absl::StatusOr<InferredLayer> InferResidual(const LayerSpec& l,
                                            const Shape& in) {
  const ResidualSpec& r = l.residual();
  const int64_t multiple = r.bottleneck() ? 4 : 1;
  if (r.out_channels() < multiple || r.out_channels() % multiple != 0 ||
      r.stride() < 0) {
    return Unfit(absl::StrCat("out_channels must be a positive multiple of ",
                              multiple, " and stride not negative, got ",
                              r.out_channels(), " and ", r.stride()));
  }
  if (in.size() != 3) return Unfit("it expects a per-sample input [C, H, W]");
  InferredLayer out;
  out.activations = 0;
  // Inferred as the layers it computes. The block projects the shortcut
  // where the main path changes the shape, which takes a stride or a new
  // width: where the written-out branch has its downsample.
  const BranchSpec branch = ResidualAsBranch(l, in[0])[0].branch();
  Shape main = in;
  RETURN_IF_ERROR(AddChain(branch.paths(0).layers(), &main, &out));
  if (main != in) {
    Shape shortcut = in;
    RETURN_IF_ERROR(AddChain(branch.paths(1).layers(), &shortcut, &out));
  }
  out.output = Checked(main);
  return out;
}

const LayerKind kResidual = {"residual", CheckResidual, FillResidual,
                             InferResidual};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kResidual, kResidual);

}  // namespace
}  // namespace cohort

// prelu: nn.PReLU(num_parameters, init), one learned slope for the
// negative inputs per channel (dim 1: the features of {F}, the channels of
// {C, L} and {C, H, W}) or one shared by all; weight {num_parameters}.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/layer_kind.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"

namespace cohort {
namespace {

using shape_inference::Checked;
using shape_inference::Unfit;
using spec_internal::NonNegative;
using spec_internal::Scope;

// Whether it fits is the shape inference's to say: only it knows the
// channels.
absl::Status CheckPrelu(const LayerSpec& l, const Scope& s) {
  const PreluSpec& p = l.prelu();
  return NonNegative(s, p, "num_parameters", p.num_parameters());
}

// PyTorch's defaults, written into the spec so that they show. An init of
// 0 reads as unset (the field has no presence), so it becomes 0.25 too.
void FillPrelu(LayerSpec* l) {
  PreluSpec* p = l->mutable_prelu();
  if (p->num_parameters() == 0) p->set_num_parameters(1);
  if (p->init() == 0) p->set_init(0.25f);
}

absl::StatusOr<InferredLayer> InferPrelu(const LayerSpec& l, const Shape& in) {
  if (in.empty() || in.size() > 3) {
    return Unfit("it expects a per-sample input [F], [C, L] or [C, H, W]");
  }
  const int64_t n = l.prelu().num_parameters();
  if (n < 0) return Unfit("num_parameters must not be negative");
  if (n > 1 && n != in[0]) {
    return Unfit(absl::StrCat("num_parameters (", n,
                              ") must be 1 or the input's channels (", in[0],
                              ")"));
  }
  InferredLayer r;
  r.output = Checked(in);
  r.params = {CheckedInt(n > 0 ? n : 1)};
  return r;
}

const LayerKind kPrelu = {"prelu", CheckPrelu, FillPrelu, InferPrelu};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kPrelu, kPrelu);

}  // namespace
}  // namespace cohort

// batchnorm1d and batchnorm2d: nn.BatchNorm1d over {C} or {C, L} samples,
// nn.BatchNorm2d over {C, H, W} samples.
#include "absl/status/status.h"
#include "common/layer_kind.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

using shape_inference::Checked;
using shape_inference::Unfit;
using spec_internal::NonNegative;
using spec_internal::Require;
using spec_internal::Scope;

absl::Status CheckBatchNorm(const BatchNormSpec& b, const Scope& s) {
  RETURN_IF_ERROR(NonNegative(s, b, "eps", b.eps()));
  return Require(b.momentum() >= 0 && b.momentum() <= 1, s, b, "momentum",
                 "in [0, 1]", b.momentum());
}

void FillBatchNorm(BatchNormSpec* b) {
  if (b->eps() == 0) b->set_eps(1e-5f);
  if (b->momentum() == 0) b->set_momentum(0.1f);
}

absl::StatusOr<InferredLayer> InferBatchNorm(bool two_d, const Shape& in) {
  if (two_d ? in.size() != 3 : in.size() != 1 && in.size() != 2) {
    return Unfit(two_d ? "it expects a per-sample input [C, H, W]"
                       : "it expects a per-sample input [F] or [C, L]");
  }
  InferredLayer r;
  r.output = Checked(in);
  r.params = {in[0], in[0]};  // scale and shift
  return r;
}

absl::Status CheckBatchNorm1d(const LayerSpec& l, const Scope& s) {
  return CheckBatchNorm(l.batchnorm1d(), s);
}
void FillBatchNorm1d(LayerSpec* l) { FillBatchNorm(l->mutable_batchnorm1d()); }
absl::StatusOr<InferredLayer> InferBatchNorm1d(const LayerSpec& l,
                                               const Shape& in) {
  return InferBatchNorm(false, in);
}

absl::Status CheckBatchNorm2d(const LayerSpec& l, const Scope& s) {
  return CheckBatchNorm(l.batchnorm2d(), s);
}
void FillBatchNorm2d(LayerSpec* l) { FillBatchNorm(l->mutable_batchnorm2d()); }
absl::StatusOr<InferredLayer> InferBatchNorm2d(const LayerSpec& l,
                                               const Shape& in) {
  return InferBatchNorm(true, in);
}

const LayerKind kBatchNorm1d = {"batchnorm1d", CheckBatchNorm1d,
                                FillBatchNorm1d, InferBatchNorm1d};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kBatchnorm1D, kBatchNorm1d);
const LayerKind kBatchNorm2d = {"batchnorm2d", CheckBatchNorm2d,
                                FillBatchNorm2d, InferBatchNorm2d};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kBatchnorm2D, kBatchNorm2d);

}  // namespace
}  // namespace cohort

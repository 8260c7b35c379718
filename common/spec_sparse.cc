// The job-level rules of sparse tables (EmbeddingBagSpec.sparse).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"
#include "common/zoo_specs.h"

namespace cohort {
namespace spec_internal {
namespace {

// Why the optimizer cannot step a table row by row, or "" when it can:
// the steps PyTorch allows on sparse gradients (kernels/sparse_update_rules.h).
std::string RowwiseRefusal(const OptimizerSpec& o) {
  const OptimizerSpec::Kind k = o.kind();
  if (k != OptimizerSpec::SGD && k != OptimizerSpec::ADAGRAD &&
      k != OptimizerSpec::ADAM) {
    return absl::StrCat("kind ", OptimizerSpec::Kind_Name(k),
                        " has no row-wise step; use SGD, ADAGRAD or ADAM "
                        "(stepped lazily, as torch.optim.SparseAdam)");
  }
  if (k == OptimizerSpec::SGD && (o.momentum() != 0 || o.nesterov())) {
    return "SGD momentum has no row-wise step (torch.optim.SGD refuses it "
           "on sparse gradients); set momentum 0";
  }
  if (o.weight_decay() != 0 && !o.no_decay_bias_and_norm()) {
    return "weight_decay would decay every row every step, which a sparse "
           "step cannot do; set no_decay_bias_and_norm (tables are left out "
           "of decay) or weight_decay 0";
  }
  return "";
}

}  // namespace

absl::Status CheckSparseTables(const JobSpec& j, const Scope& s) {
  absl::StatusOr<std::vector<LayerSpec>> layers = LayerSpecs(j.model());
  if (!layers.ok()) return absl::OkStatus();
  google::protobuf::RepeatedPtrField<LayerSpec> all(layers->begin(),
                                                    layers->end());
  std::vector<const EmbeddingBagSpec*> bags;
  CollectEmbeddingBags(all, &bags);
  bool sparse = false;
  for (const EmbeddingBagSpec* bag : bags) sparse = sparse || bag->sparse();
  if (!sparse) return absl::OkStatus();
  const Scope model = s.Nested(j, "model", -1);
  const std::string at = j.model().zoo().empty()
                             ? model.At(j.model(), "layers", -1)
                             : model.At(j.model(), "zoo", -1);
  if (j.mode() != PS) {
    return absl::InvalidArgumentError(absl::StrCat(
        at,
        "embedding_bag.sparse needs mode PS (the shards hold sparse tables "
        "by row); in all-reduce mode leave sparse unset and the tables are "
        "dense parameters"));
  }
  const std::string why = RowwiseRefusal(j.optimizer());
  if (!why.empty()) {
    return s.Nested(j, "optimizer", -1)
        .Error(
            j.optimizer(), "kind", -1,
            absl::StrCat("cannot step the sparse embedding_bag tables: ", why));
  }
  if (j.gradient_accumulation_steps() > 1) {
    return s.Error(j, "gradient_accumulation_steps", -1,
                   "must be 0 or 1 with sparse embedding_bag tables (a "
                   "step's rows are those of one batch per replica)");
  }
  return absl::OkStatus();
}

}  // namespace spec_internal
}  // namespace cohort

// embedding_bag: one nn.EmbeddingBag table per categorical feature, a flat
// {2 T} sample of row ids (each a pair of floats, r / 2^24 and r mod 2^24)
// -> {T dim}. Table t is {rows[t], dim}. Like the token embeddings, the
// tables are left out of weight decay by no_decay_bias_and_norm. Sparse
// tables (the spec's `sparse`) are no parameters of the flat buffer.
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
using spec_internal::Positive;
using spec_internal::Scope;

// A pair of floats below 2^24 each names rows below 2^48.
constexpr int64_t kMaxRows = int64_t{1} << 48;

absl::Status CheckEmbeddingBag(const LayerSpec& l, const Scope& s) {
  const EmbeddingBagSpec& e = l.embedding_bag();
  if (e.rows_size() == 0) {
    return s.Error(e, "rows", -1,
                   "must list each categorical feature's table rows, got none");
  }
  for (int t = 0; t < e.rows_size(); ++t) {
    if (e.rows(t) <= 0 || e.rows(t) > kMaxRows) {
      return s.Error(e, "rows", t,
                     absl::StrCat("must be in [1, 2^48], got ", e.rows(t)));
    }
  }
  return Positive(s, e, "dim", e.dim());
}

absl::StatusOr<InferredLayer> InferEmbeddingBag(const LayerSpec& l,
                                                const Shape& in) {
  const EmbeddingBagSpec& e = l.embedding_bag();
  const int64_t tables = e.rows_size();
  if (tables == 0 || e.dim() <= 0) {
    return Unfit(absl::StrCat("it needs at least one table and dim > 0, got ",
                              tables, " tables and dim ", e.dim()));
  }
  if (in.size() != 1 || in[0] != 2 * tables) {
    return Unfit(
        absl::StrCat("its ", tables, " tables read a flat input [", 2 * tables,
                     "] (a pair of floats per categorical feature's row id)"));
  }
  InferredLayer r;
  r.output = {CheckedInt(tables) * e.dim()};
  // Sparse tables live on the parameter-server shards, outside the flat
  // buffers that these sizes lay out (the shards' partitions among them).
  if (e.sparse()) return r;
  for (int64_t rows : e.rows()) {
    r.params.push_back(CheckedInt(rows) * e.dim());
    r.no_decay.push_back(true);
  }
  return r;
}

const LayerKind kEmbeddingBag = {"embedding_bag", CheckEmbeddingBag, nullptr,
                                 InferEmbeddingBag};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kEmbeddingBag, kEmbeddingBag);

}  // namespace
}  // namespace cohort

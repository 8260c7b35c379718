// The token-side kinds of a language model: embedding (token ids {1, L}
// -> {dim, L}, nn.Embedding), positional_embedding (a learned vector per
// position, GPT's wpe) and tied_lm_head ({D, L} -> {vocab, L} logits with
// the model's embedding weight).
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/layer_kind.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"

namespace cohort {
namespace shape_inference {

// The tied head borrows the embedding's weight: no tensors of its own.
absl::StatusOr<InferredLayer> InferTiedLmHead(const EmbeddingSpec& embedding,
                                              const Shape& in) {
  RETURN_IF_ERROR(CheckSequence(in));
  if (in[0] != embedding.dim()) {
    return Unfit(absl::StrCat("its input has ", in[0],
                              " features but the embedding it shares its "
                              "weight with has dim ",
                              embedding.dim()));
  }
  InferredLayer r;
  r.output = {embedding.vocab_size(), in[1]};
  return r;
}

}  // namespace shape_inference

namespace {

using shape_inference::Checked;
using shape_inference::CheckSequence;
using shape_inference::Unfit;
using spec_internal::Positive;
using spec_internal::Require;
using spec_internal::Scope;

absl::Status CheckEmbedding(const LayerSpec& l, const Scope& s) {
  const EmbeddingSpec& e = l.embedding();
  // Ids travel as float32 between the loader and the embedding.
  RETURN_IF_ERROR(Require(e.vocab_size() >= 1 && e.vocab_size() <= 1 << 24, s,
                          e, "vocab_size", "in [1, 16777216]", e.vocab_size()));
  return Positive(s, e, "dim", e.dim());
}

absl::StatusOr<InferredLayer> InferEmbedding(const LayerSpec& l,
                                             const Shape& in) {
  const EmbeddingSpec& e = l.embedding();
  if (e.vocab_size() <= 0 || e.dim() <= 0) {
    return Unfit(absl::StrCat("vocab_size and dim must be positive, got ",
                              e.vocab_size(), " and ", e.dim()));
  }
  if (in.size() != 2 || in[0] != 1) {
    return Unfit(
        "it expects token ids {1, L}, as the TOKENS data set gives; an "
        "embedding is the model's first layer");
  }
  InferredLayer r;
  r.output = {e.dim(), in[1]};
  r.params = {CheckedInt(e.vocab_size()) * e.dim()};
  r.no_decay = {true};
  return r;
}

absl::StatusOr<InferredLayer> InferPositional(const LayerSpec& l,
                                              const Shape& in) {
  RETURN_IF_ERROR(CheckSequence(in));
  InferredLayer r;
  r.output = Checked(in);
  r.params = {CheckedInt(in[0]) * in[1]};
  r.no_decay = {true};
  return r;
}

// InferModelSizes infers the model's own tied heads, with the embedding
// they share (shape_inference::InferTiedLmHead); any other place is wrong.
absl::StatusOr<InferredLayer> InferMisplacedTiedLmHead(const LayerSpec& l,
                                                       const Shape& in) {
  return Unfit(
      "a tied_lm_head must be one of the model's layers (not inside a "
      "branch), after an embedding");
}

bool Sequence(const LayerSpec& l) { return true; }

const LayerKind kEmbedding = {"embedding", CheckEmbedding, nullptr,
                              InferEmbedding, Sequence};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kEmbedding, kEmbedding);
const LayerKind kPositionalEmbedding = {"positional_embedding", nullptr,
                                        nullptr, InferPositional, Sequence};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kPositionalEmbedding,
                           kPositionalEmbedding);
const LayerKind kTiedLmHead = {"tied_lm_head", nullptr, nullptr,
                               InferMisplacedTiedLmHead, Sequence};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kTiedLmHead, kTiedLmHead);

}  // namespace
}  // namespace cohort

// The pieces of shape inference that every layer kind shares
// (common/layer_kinds/): checked element counts, the "does not fit"
// status, and one layer's sizes, into which container kinds (residual,
// branch) recurse.
//
// Internal to common's layer kinds and model sizes; everyone else asks
// common/model_sizes.h. Thread safety: all functions are pure and may be
// called concurrently once static registration is over.
#ifndef COHORT_COMMON_SHAPE_INFERENCE_H_
#define COHORT_COMMON_SHAPE_INFERENCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/checked_int.h"
#include "common/layer_kind.h"
#include "common/layer_sizes.h"
#include "common/tensor.h"
#include "proto/job.pb.h"

namespace cohort {
namespace shape_inference {

// The input does not fit the layer, for `why` (without the "layer I"
// prefix, which the caller adds).
absl::Status Unfit(absl::string_view why);

// The product of `dims`; overflow propagates.
CheckedInt Elements(const std::vector<CheckedInt>& dims);

std::vector<CheckedInt> Checked(const Shape& s);

// (padded - kernel) / stride + 1, where the kernel is known to fit.
CheckedInt Positions(CheckedInt padded, int64_t kernel, int64_t stride);

// Sequences are {D, L} (worker/layers/layer.h).
absl::Status CheckSequence(const Shape& in);

// The output of a layer that keeps its input's shape and holds no
// parameters (activations, dropout).
absl::StatusOr<InferredLayer> InferElementwise(const LayerSpec& l,
                                               const Shape& in);

// The LayerSpec field that `l` sets ("conv2d"), "none" when it sets none.
std::string KindName(const LayerSpec& l);

// Converts a checked result to plain sizes; an overflow anywhere in it is
// an error.
absl::StatusOr<LayerSizes> Settle(const InferredLayer& r, const Shape& in);

// The sizes of `l` over per-sample input `in`, through its kind's infer.
absl::StatusOr<LayerSizes> InferLayer(const LayerSpec& l, const Shape& in);

// A tied_lm_head after `embedding`, whose weight it borrows
// (common/layer_kinds/embedding.cc): only the model knows which embedding
// that is, so InferModelSizes asks for it by name.
absl::StatusOr<InferredLayer> InferTiedLmHead(const EmbeddingSpec& embedding,
                                              const Shape& in);

}  // namespace shape_inference
}  // namespace cohort

#endif  // COHORT_COMMON_SHAPE_INFERENCE_H_

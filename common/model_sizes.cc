#include "common/model_sizes.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/checked_int.h"
#include "common/shape_inference.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

using shape_inference::Checked;
using shape_inference::Elements;
using shape_inference::InferLayer;
using shape_inference::KindName;
using shape_inference::Settle;
using shape_inference::Unfit;

// InferLayer, and a tied head after `embedding` (null: none yet).
absl::StatusOr<LayerSizes> InferTopLayer(const LayerSpec& l,
                                         const LayerSpec* embedding,
                                         const Shape& in) {
  if (!l.has_tied_lm_head()) return InferLayer(l, in);
  if (embedding == nullptr) {
    return Unfit("tied_lm_head needs an embedding layer before it");
  }
  ASSIGN_OR_RETURN(const InferredLayer r, shape_inference::InferTiedLmHead(
                                              embedding->embedding(), in));
  ASSIGN_OR_RETURN(LayerSizes s, Settle(r, in));
  s.kind = KindName(l);
  return s;
}

absl::Status CheckInput(const Shape& input) {
  for (int64_t d : input) {
    if (d <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the per-sample input ", ShapeString(input),
                       " has an empty dimension"));
    }
  }
  if (input.empty() || Elements(Checked(input)).overflow()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the per-sample input ", ShapeString(input),
        input.empty() ? " has no dimensions" : " has more than 2^63 elements"));
  }
  return absl::OkStatus();
}

// Adds `s` to the totals; false when one passes int64_t.
bool Accumulate(const LayerSizes& s, CheckedInt* params, CheckedInt* padded,
                CheckedInt* acts) {
  for (int64_t p : s.param_tensors) *padded += RoundUpTo(p, kParamAlignment);
  *params += s.parameters;
  *acts += s.activations;
  return !params->overflow() && !padded->overflow() && !acts->overflow();
}

// Layer i > 0 writes the gradient of its input, layer i-1's output, into
// the buffer of parity (n - 1 - i) % 2.
std::vector<ModelSizes::GradientBuffer> GradientBuffers(
    const std::vector<LayerSizes>& layers) {
  const int n = static_cast<int>(layers.size());
  std::vector<ModelSizes::GradientBuffer> buffers(2);
  for (int i = 1; i < n; ++i) {
    ModelSizes::GradientBuffer& b = buffers[(n - 1 - i) % 2];
    const int64_t elements = NumElements(layers[i].input);
    if (elements > b.elements) b = {i - 1, elements};
  }
  std::vector<ModelSizes::GradientBuffer> used;
  for (const ModelSizes::GradientBuffer& b : buffers) {
    if (b.layer >= 0) used.push_back(b);
  }
  return used;
}

}  // namespace

std::vector<int64_t> ModelSizes::PaddedParamSizes() const {
  std::vector<int64_t> sizes;
  for (const LayerSizes& l : layers) {
    for (int64_t p : l.param_tensors) {
      sizes.push_back(RoundUpTo(p, kParamAlignment).value());
    }
  }
  return sizes;
}

std::vector<bool> ModelSizes::ParamNoDecay() const {
  std::vector<bool> flags;
  for (const LayerSizes& l : layers) {
    flags.insert(flags.end(), l.param_no_decay.begin(), l.param_no_decay.end());
  }
  return flags;
}

std::string LayerName(int index, const std::string& kind) {
  return absl::StrCat("layer ", index, " (", kind, ")");
}

absl::StatusOr<ModelSizes> InferModelSizes(const std::vector<LayerSpec>& layers,
                                           const Shape& input,
                                           int* failed_layer) {
  if (failed_layer != nullptr) *failed_layer = -1;
  RETURN_IF_ERROR(CheckInput(input));
  ModelSizes m;
  m.input = input;
  CheckedInt params = 0, padded = 0, acts = 0;
  Shape shape = input;
  const LayerSpec* embedding = nullptr;  // the first, which a tied head uses
  for (size_t i = 0; i < layers.size(); ++i) {
    absl::StatusOr<LayerSizes> s = InferTopLayer(layers[i], embedding, shape);
    if (embedding == nullptr && layers[i].has_embedding()) {
      embedding = &layers[i];
    }
    if (s.ok() && !Accumulate(*s, &params, &padded, &acts)) {
      s = Unfit("the model's sizes pass 2^63 elements");
    }
    if (!s.ok()) {
      if (failed_layer != nullptr) *failed_layer = static_cast<int>(i);
      return absl::InvalidArgumentError(absl::StrCat(
          LayerName(i, KindName(layers[i])), " cannot take input of shape ",
          ShapeString(shape), ": ", s.status().message()));
    }
    shape = s->output;
    m.layers.push_back(*std::move(s));
  }
  m.parameters = params.value();
  m.padded_parameters = padded.value();
  m.activations = acts.value();
  m.gradient_buffers = GradientBuffers(m.layers);
  return m;
}

}  // namespace cohort

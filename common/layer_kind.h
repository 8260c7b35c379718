// One layer kind as the spec checker and the shape inference know it, and
// the registry that maps a LayerSpec to it.
//
// Each kind lives in its own file under common/layer_kinds/, which defines
// its descriptor and registers it with COHORT_REGISTER_LAYER_KIND; nothing
// else names the kind. FindLayerKind is the one place in this layer that
// dispatches on LayerSpec's `kind` oneof; the worker's and the GPU plugin's
// registries key on LayerKindNumber, so they dispatch through it too.
//
// Thread safety: registration happens during static initialisation, before
// main; afterwards the registry is read-only and every function here may be
// called concurrently.
#ifndef COHORT_COMMON_LAYER_KIND_H_
#define COHORT_COMMON_LAYER_KIND_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/checked_int.h"
#include "common/spec_scope.h"
#include "common/static_registration.h"
#include "common/tensor.h"
#include "proto/job.pb.h"

namespace cohort {

// One layer's shape inference: the per-sample output and the parameter
// tensors, in checked arithmetic, or a reason the input does not fit
// (without the "layer I" prefix, which the caller adds).
struct InferredLayer {
  std::vector<CheckedInt> output;
  std::vector<CheckedInt> params;
  // Per parameter tensor, whether it is a bias or a norm parameter
  // (optimizer.no_decay_bias_and_norm); empty: derived from the kind's
  // name and the tensor order (weight, bias).
  std::vector<bool> no_decay;
  // Per-sample elements held, when more than the output (residual blocks).
  std::optional<CheckedInt> activations;
};

struct LayerKind {
  // The LayerSpec field that selects the kind: "conv2d".
  const char* name = "";
  // Checks the kind's own fields; `s` is the scope of the kind's message
  // (errors read "FILE:L:C: model.layers[2].conv2d.kernel must be ...").
  // Null: the kind has no fields to check.
  absl::Status (*check)(const LayerSpec& l,
                        const spec_internal::Scope& s) = nullptr;
  // Fills the defaults a checked spec shows (stride 1, eps 1e-5). Null:
  // none.
  void (*fill_defaults)(LayerSpec* l) = nullptr;
  // The layer's sizes over per-sample input `in`. Required.
  absl::StatusOr<InferredLayer> (*infer)(const LayerSpec& l,
                                         const Shape& in) = nullptr;
  // Whether the layer works on sequences ({features, length} per sample)
  // in the exports' sequence-major layout. Null: never.
  bool (*sequence)(const LayerSpec& l) = nullptr;
};

// The field number of `l`'s kind (LayerSpec::kConv2D ...), 0 for none: the
// key of every per-device registry.
int LayerKindNumber(const LayerSpec& l);

// The descriptor of `l`'s kind; null when `l` names no kind or the kind is
// not registered (a build that left its file out).
const LayerKind* FindLayerKind(const LayerSpec& l);
const LayerKind* FindLayerKind(int number);

// Registers `kind` under field `number`; returns true so that a static
// initialiser can call it. Registering a number twice is a fatal error.
bool RegisterLayerKind(int number, const LayerKind& kind);

// Every registered kind's number, ascending.
std::vector<int> RegisteredLayerKinds();

}  // namespace cohort

// Registers `kind` (a LayerKind) for LayerSpec field `number` at start-up.
#define COHORT_REGISTER_LAYER_KIND(number, kind) \
  COHORT_STATIC_REGISTRATION(::cohort::RegisterLayerKind(number, kind))

#endif  // COHORT_COMMON_LAYER_KIND_H_

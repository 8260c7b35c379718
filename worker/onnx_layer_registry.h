// The ONNX exporter's layer kinds: for each LayerSpec kind, the functions
// that add its nodes to the graph, and AddLayer, which adds one layer
// through them. Internal to the exporter (worker/onnx_export.h).
//
// A kind has up to two forms. The channel-major form takes its input in
// the engine's layout ([N, C, ...]); the sequence form is used where the
// kind says the layer works on sequences (common/layer_kind.h
// LayerKind::sequence) and takes its input in whatever layout it comes,
// choosing its own (see worker/onnx_graph.h). Each kind registers its forms
// from its own file under worker/onnx_kinds/ with
// COHORT_REGISTER_ONNX_LAYER, keyed by the kind's field number
// (LayerKindNumber).
//
// Thread safety: registration happens during static initialisation,
// before main; afterwards the registry is read-only and the lookups may be
// called concurrently. AddLayer writes into one GraphBuilder, which one
// thread owns.
#ifndef COHORT_WORKER_ONNX_LAYER_REGISTRY_H_
#define COHORT_WORKER_ONNX_LAYER_REGISTRY_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/static_registration.h"
#include "common/tensor.h"
#include "proto/job.pb.h"

namespace cohort {
namespace onnx_internal {

class GraphBuilder;

// Where one layer sits in the graph.
struct OnnxLayerIo {
  // Its parameters are named `prefix`.NAME ("3", or "3.paths.0.1" inside a
  // branch).
  std::string prefix;
  // Its input value.
  std::string in;
  // Its per-sample input and output shapes.
  Shape in_shape;
  Shape out_shape;
};

// Adds layer `l` on `io.in`; returns its output's name.
using OnnxLayerExporter = absl::StatusOr<std::string> (*)(
    GraphBuilder& g, const LayerSpec& l, const OnnxLayerIo& io);

struct OnnxLayerForms {
  // On a channel-major input. Null: the kind is always a sequence layer.
  OnnxLayerExporter channel_major = nullptr;
  // Where the kind is a sequence layer. Null: never.
  OnnxLayerExporter sequence = nullptr;
};

// Registers `forms` (at least one set) for LayerSpec field `number`;
// returns true so that a static initialiser can call it. Registering a
// number twice is a fatal error.
bool RegisterOnnxLayer(int number, const OnnxLayerForms& forms);

// The forms registered for field `number`; null when none are.
const OnnxLayerForms* FindOnnxLayer(int number);

// Whether `l` is exported in its sequence form.
bool IsSequenceLayer(const LayerSpec& l);

// The layer of spec `l` whose parameters are named `prefix`.NAME on value
// `in_value`; its output's name. `in_shape` and `out_shape` are the
// layer's per-sample input and output shapes. Unimplemented naming the
// layer for a kind without an ONNX form.
absl::StatusOr<std::string> AddLayer(GraphBuilder& g, const LayerSpec& l,
                                     const std::string& prefix,
                                     const std::string& in_value,
                                     const Shape& in_shape,
                                     const Shape& out_shape);

}  // namespace onnx_internal
}  // namespace cohort

// Registers the exporters `channel_major` and `sequence` (either may be
// nullptr) for LayerSpec field `number` at start-up.
#define COHORT_REGISTER_ONNX_LAYER(number, channel_major, sequence)      \
  COHORT_STATIC_REGISTRATION(::cohort::onnx_internal::RegisterOnnxLayer( \
      number,                                                            \
      ::cohort::onnx_internal::OnnxLayerForms{channel_major, sequence}))

#endif  // COHORT_WORKER_ONNX_LAYER_REGISTRY_H_

#include "worker/onnx_export.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/layer_kind.h"
#include "common/model_sizes.h"
#include "common/status_macros.h"
#include "common/zoo_specs.h"
#include "onnx/onnx_pb.h"
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace {

using onnx_internal::AddLayer;
using onnx_internal::GraphBuilder;
using onnx_internal::IsSequenceLayer;

void AddValueInfo(onnx::ValueInfoProto* v, const std::string& name,
                  const Shape& per_sample) {
  v->set_name(name);
  onnx::TypeProto::Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto* s = t->mutable_shape();
  s->add_dim()->set_dim_param("batch");
  for (int64_t d : per_sample) s->add_dim()->set_dim_value(d);
}

}  // namespace

namespace onnx_internal {

absl::StatusOr<std::string> AddLayer(GraphBuilder& g, const LayerSpec& l,
                                     const std::string& prefix,
                                     const std::string& in_value,
                                     const Shape& in_shape,
                                     const Shape& out_shape) {
  const OnnxLayerForms* forms = FindOnnxLayer(LayerKindNumber(l));
  if (IsSequenceLayer(l)) {
    if (forms == nullptr || forms->sequence == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer ", prefix, " is not a transformer layer"));
    }
    return forms->sequence(g, l, {prefix, in_value, in_shape, out_shape});
  }
  if (forms == nullptr || forms->channel_major == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("layer ", prefix, " has no ONNX form"));
  }
  // Every other layer takes the engine's channel-major layout.
  return forms->channel_major(
      g, l, {prefix, g.ChannelMajor(in_value), in_shape, out_shape});
}

}  // namespace onnx_internal

absl::StatusOr<std::vector<Shape>> OnnxLayerOutputs(
    const std::vector<LayerSpec>& layers, const Shape& input_shape) {
  // One layer at a time, so that the transformer layers (whose sizes this
  // file knows) and the others (common/model_sizes.h) can mix.
  std::vector<Shape> outs;
  int64_t vocab = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Shape& in = i == 0 ? input_shape : outs.back();
    if (IsSequenceLayer(layers[i])) {
      ASSIGN_OR_RETURN(
          Shape out, onnx_internal::SequenceLayerOutput(layers[i], in, vocab));
      outs.push_back(std::move(out));
      if (layers[i].has_embedding() && vocab == 0) {
        vocab = layers[i].embedding().vocab_size();
      }
      continue;
    }
    ASSIGN_OR_RETURN(const ModelSizes sizes, InferModelSizes({layers[i]}, in));
    outs.push_back(sizes.layers[0].output);
  }
  return outs;
}

absl::StatusOr<std::string> OnnxModelBytes(const OnnxSource& source) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("cohort");
  m.set_model_version(source.step);
  onnx::OperatorSetIdProto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  auto meta = [&m](const std::string& key, const std::string& value) {
    onnx::StringStringEntryProto* e = m.add_metadata_props();
    e->set_key(key);
    e->set_value(value);
  };
  meta("cohort.job_spec", source.spec_text);
  meta("cohort.step", absl::StrCat(source.step));
  const bool tokens =
      !source.layers.empty() && source.layers[0].has_embedding();
  meta("cohort.input",
       tokens ? "token ids as floats, [batch, 1, L], as the TOKENS data set "
                "gives them (exact below 2^24); output: logits [batch, "
                "vocab, L]"
              : "the samples as the training data set gave them, "
                "normalisation included (see cohort.job_spec's data block); "
                "nothing is folded in");
  onnx::GraphProto* graph = m.mutable_graph();
  graph->set_name(source.name);
  AddValueInfo(graph->add_input(), "input", source.input_shape);
  std::vector<Shape> outs = source.layer_outputs;
  if (outs.empty()) {
    ASSIGN_OR_RETURN(outs, OnnxLayerOutputs(source.layers, source.input_shape));
  }
  GraphBuilder g(graph, source.tensors);
  std::string cur = "input";
  for (size_t i = 0; i < source.layers.size(); ++i) {
    ASSIGN_OR_RETURN(
        cur, AddLayer(g, source.layers[i], absl::StrCat(i), cur,
                      i == 0 ? source.input_shape : outs[i - 1], outs[i]));
  }
  // The graph's output under a fixed name, in the engine's layout.
  onnx::NodeProto* id = graph->add_node();
  id->set_op_type("Identity");
  id->set_name("output_identity");
  id->add_input(g.ChannelMajor(cur));
  id->add_output("output");
  AddValueInfo(graph->add_output(), "output",
               outs.empty() ? source.input_shape : outs.back());
  return m.SerializeAsString();
}

absl::StatusOr<std::string> OnnxModelBytes(TrainedModel& trained) {
  Model<float>& model = *trained.model;
  OnnxSource source;
  if (!trained.spec.name().empty()) source.name = trained.spec.name();
  source.spec_text = trained.spec_text;
  source.step = trained.step;
  ASSIGN_OR_RETURN(source.layers, LayerSpecs(trained.spec.model()));
  source.input_shape = trained.input_shape;
  source.layer_outputs = model.layer_outputs();
  for (const auto& e : model.param_store().entries()) {
    source.tensors[e.name] = {model.params().data() + e.offset, e.shape,
                              model.TensorName(e.name)};
  }
  const std::vector<std::string> names = model.BufferNames();
  const std::vector<Tensor*> buffers = model.Buffers();
  for (size_t i = 0; i < names.size(); ++i) {
    source.tensors[names[i]] = {buffers[i]->data(), buffers[i]->shape(),
                                model.TensorName(names[i])};
  }
  return OnnxModelBytes(source);
}

}  // namespace cohort

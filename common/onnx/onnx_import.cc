#include "common/onnx/onnx_import.h"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/onnx/onnx_graph_view.h"
#include "common/onnx/onnx_importer.h"
#include "common/status_macros.h"
#include "common/tensor_names.h"
#include "google/protobuf/text_format.h"

namespace cohort {
namespace {

using onnx_import_internal::Dims;
using onnx_import_internal::DimsString;
using onnx_import_internal::GraphView;
using onnx_import_internal::Importer;
using onnx_import_internal::Region;
using onnx_import_internal::Seq;

absl::Status Bad(const std::string& why) {
  return absl::InvalidArgumentError(why);
}

// The one graph input that is not an initializer (old exports list the
// weights as inputs too).
absl::StatusOr<const onnx::ValueInfoProto*> DataInput(
    const onnx::GraphProto& graph) {
  std::set<std::string> weights;
  for (const onnx::TensorProto& t : graph.initializer())
    weights.insert(t.name());
  std::vector<const onnx::ValueInfoProto*> inputs;
  for (const onnx::ValueInfoProto& v : graph.input()) {
    if (weights.count(v.name()) == 0) inputs.push_back(&v);
  }
  if (inputs.size() != 1) {
    return Bad(absl::StrCat("the graph has ", inputs.size(),
                            " inputs besides its weights; cohort's model "
                            "takes one"));
  }
  return inputs[0];
}

// Whether `input` holds token ids (an integer input of a language model).
bool TokenIds(const onnx::ValueInfoProto& input) {
  const int type = input.type().tensor_type().elem_type();
  return type == onnx::TensorProto::INT64 || type == onnx::TensorProto::INT32;
}

// The input's per-sample shape: the graph's, or `override`; and the batch
// size torch exported with (-1: symbolic).
absl::StatusOr<Dims> InputShape(const onnx::ValueInfoProto& input,
                                const Dims& override, int64_t* batch) {
  const onnx::TypeProto::Tensor& t = input.type().tensor_type();
  if (t.elem_type() != onnx::TensorProto::FLOAT && !TokenIds(input)) {
    return Bad(absl::StrCat("input ", input.name(), " has element type ",
                            t.elem_type(),
                            "; cohort's models take float32, or int64 token "
                            "ids [N, L]"));
  }
  const auto& dims = t.shape().dim();
  *batch = dims.empty() || !dims[0].has_dim_value() ? -1 : dims[0].dim_value();
  const bool tokens = TokenIds(input);
  if (!override.empty()) {
    Dims wanted = override;
    // cohort's own spelling of a token window, {1, L}, is also taken.
    if (tokens && wanted.size() == 2 && wanted[0] == 1) wanted = {wanted[1]};
    if (t.has_shape() && dims.size() != static_cast<int>(wanted.size()) + 1) {
      return Bad(absl::StrCat(
          "--input-shape ", DimsString(override), " has ", override.size(),
          " dims where input ", input.name(), " has ", dims.size() - 1,
          " per sample", tokens ? " (token ids: give L)" : ""));
    }
    return wanted;
  }
  if (!t.has_shape() || dims.size() < 2) {
    return Bad(absl::StrCat("input ", input.name(),
                            " has no [N, ...] shape; give --input-shape"));
  }
  Dims out;
  for (int i = 1; i < dims.size(); ++i) {
    if (!dims[i].has_dim_value() || dims[i].dim_value() <= 0) {
      return Bad(absl::StrCat(
          "input ", input.name(), " has the symbolic dim ",
          dims[i].dim_param().empty() ? "?" : dims[i].dim_param(),
          tokens ? "; give --input-shape=L" : "; give --input-shape=C,H,W"));
    }
    out.push_back(dims[i].dim_value());
  }
  return out;
}

// The graph's one data output: the outputs torch adds in training mode
// (BatchNorm's running statistics, Dropout's mask) are not first outputs.
absl::StatusOr<std::string> DataOutput(const onnx::GraphProto& graph,
                                       const GraphView& view) {
  std::vector<std::string> outs;
  for (const onnx::ValueInfoProto& v : graph.output()) {
    const int p = view.Producer(v.name());
    if (p >= 0 && view.node(p).output(0) != v.name()) continue;
    outs.push_back(v.name());
  }
  if (outs.size() != 1) {
    return Bad(absl::StrCat("the graph has ", outs.size(), " outputs (",
                            absl::StrJoin(outs, ", "),
                            "); cohort's model has one"));
  }
  if (!view.IsData(outs[0]) || view.Producer(outs[0]) < 0) {
    return Bad(absl::StrCat("output ", outs[0],
                            " does not depend on the input through any "
                            "layer"));
  }
  return outs[0];
}

// The data nodes on some path to `output`.
std::vector<char> NodesReaching(const GraphView& view,
                                const std::string& output) {
  std::vector<char> keep(view.num_nodes(), 0);
  std::deque<int> todo = {view.Producer(output)};
  while (!todo.empty()) {
    const int n = todo.front();
    todo.pop_front();
    if (n < 0 || keep[n] || !view.IsDataNode(n)) continue;
    keep[n] = 1;
    for (const std::string& in : view.DataInputs(n)) {
      todo.push_back(view.Producer(in));
    }
  }
  return keep;
}

// One line per layer, a branch's paths nested below it.
void AppendLayers(const google::protobuf::RepeatedPtrField<LayerSpec>& layers,
                  int indent, std::string* text) {
  const std::string pad(indent, ' ');
  google::protobuf::TextFormat::Printer line;
  line.SetSingleLineMode(true);
  for (const LayerSpec& layer : layers) {
    if (!layer.has_branch()) {
      std::string one;
      line.PrintToString(layer, &one);
      absl::StrAppend(text, pad, "layers { ", one, "}\n");
      continue;
    }
    absl::StrAppend(text, pad, "layers {\n", pad, "  branch {\n");
    for (const BranchSpec::Path& path : layer.branch().paths()) {
      absl::StrAppend(text, pad, "    paths {",
                      path.layers().empty() ? "" : "\n");
      AppendLayers(path.layers(), indent + 6, text);
      absl::StrAppend(text, path.layers().empty() ? "" : pad + "    ", "}\n");
    }
    absl::StrAppend(text, pad, "    combine: ",
                    BranchSpec::Combine_Name(layer.branch().combine()), "\n",
                    pad, "  }\n", pad, "}\n");
  }
}

// Clears every name that an earlier layer (in `seen`) already has, so that
// no two layers save tensors under one name.
void KeepUniqueNames(google::protobuf::RepeatedPtrField<LayerSpec>* layers,
                     std::set<std::string>* seen) {
  for (LayerSpec& l : *layers) {
    if (!l.name().empty() && !seen->insert(l.name()).second) l.clear_name();
    if (!l.has_branch()) continue;
    for (BranchSpec::Path& p : *l.mutable_branch()->mutable_paths()) {
      KeepUniqueNames(p.mutable_layers(), seen);
    }
  }
}

// A data section that runs: random samples of the model's input shape, or,
// for a token model, a token file of its vocabulary to be filled in.
std::string DataPlaceholder(const ImportedModel& imported) {
  const ModelSpec& m = imported.model;
  if (m.layers_size() > 0 && m.layers(0).has_embedding()) {
    return absl::StrCat(
        "data {\n  kind: TOKENS\n  dir: \".\"\n  tokens { train: "
        "\"train.bin\" format: UINT16 context: ",
        imported.input_shape.back(),
        " vocab_size: ", m.layers(0).embedding().vocab_size(), " }\n}\n");
  }
  std::string text =
      absl::StrCat("data {\n  kind: SYNTHETIC\n  synthetic { shape: [",
                   absl::StrJoin(imported.input_shape, ", "), "]");
  if (imported.output_shape.size() == 1) {
    absl::StrAppend(&text, " classes: ", imported.output_shape[0]);
  }
  return absl::StrCat(text, " }\n}\n");
}

}  // namespace

absl::StatusOr<ImportedModel> ImportOnnx(const onnx::ModelProto& model,
                                         const OnnxImportOptions& options) {
  ImportedModel out;
  for (const onnx::OperatorSetIdProto& o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") out.opset = o.version();
  }
  if (!model.producer_name().empty()) {
    out.producer = std::string(absl::StripTrailingAsciiWhitespace(
        absl::StrCat(model.producer_name(), " ", model.producer_version())));
  }
  const onnx::GraphProto& graph = model.graph();
  ASSIGN_OR_RETURN(const onnx::ValueInfoProto* input, DataInput(graph));
  int64_t batch = -1;
  ASSIGN_OR_RETURN(out.input_shape,
                   InputShape(*input, options.input_shape, &batch));
  const bool tokens = TokenIds(*input);
  Dims graph_shape = out.input_shape;
  if (tokens) {
    // cohort's TOKENS data gives ids as {1, L}.
    if (graph_shape.size() == 2 && graph_shape[0] == 1)
      graph_shape.erase(graph_shape.begin());
    if (graph_shape.size() != 1) {
      return Bad(absl::StrCat("input ", input->name(), " holds token ids of ",
                              DimsString(out.input_shape),
                              " per sample; cohort takes [L]"));
    }
    out.input_shape = {1, graph_shape[0]};
  } else if (out.input_shape.empty() || out.input_shape.size() > 3) {
    return Bad(absl::StrCat("input ", input->name(), " has samples of ",
                            DimsString(out.input_shape),
                            "; cohort takes [F], [C, L] or [C, H, W]"));
  }
  ASSIGN_OR_RETURN(GraphView view, GraphView::Build(graph, input->name()));
  ASSIGN_OR_RETURN(const std::string output, DataOutput(graph, view));
  view.SetShape(input->name(), graph_shape);
  const std::vector<char> allowed = NodesReaching(view, output);
  Importer importer(&view, &out.weights);
  importer.set_export_batch(batch);
  importer.set_opset(out.opset);
  importer.set_tokens(tokens);
  RETURN_IF_ERROR(importer.MapChain(
      input->name(),
      Region{output, &allowed, Seq{out.model.mutable_layers(), ""}}));
  out.output_shape = *view.ShapeOf(output);
  if (tokens) {  // [L, V] per sample is cohort's {V, L}
    std::reverse(out.output_shape.begin(), out.output_shape.end());
  }
  if (out.model.layers_size() == 0) {
    return Bad("the graph has no layers cohort keeps (only identities)");
  }
  std::set<std::string> seen;
  KeepUniqueNames(out.model.mutable_layers(), &seen);
  if (tokens) {
    onnx_import_internal::FuseTransformerBlocks(&out.model, &out.weights);
  } else {
    onnx_import_internal::FuseResidualBlocks(&out.model, &out.weights);
  }
  const TensorNames names(std::vector<LayerSpec>(out.model.layers().begin(),
                                                 out.model.layers().end()));
  for (SafeTensor& w : out.weights) w.name = names.Of(w.name);
  return out;
}

absl::StatusOr<ImportedModel> ImportOnnxBytes(
    const std::string& bytes, const OnnxImportOptions& options) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) {
    return absl::DataLossError(
        "not an ONNX model: the file does not parse as an ONNX ModelProto");
  }
  return ImportOnnx(model, options);
}

std::string ImportedJobText(const ImportedModel& imported,
                            const std::string& source,
                            const std::string& weights_path) {
  const Dims& out = imported.output_shape;
  std::string text =
      absl::StrCat("# Imported by `cohort import` from ", source);
  if (!imported.producer.empty()) {
    absl::StrAppend(&text, " (", imported.producer, ", opset ", imported.opset,
                    ")");
  }
  absl::StrAppend(&text, ".\n# Samples of ", DimsString(imported.input_shape),
                  " in, ", DimsString(out),
                  " out. The data section is a placeholder: put your\n"
                  "# own data set there (README.md, \"Your data\").\n");
  if (!weights_path.empty()) {
    absl::StrAppend(&text,
                    "# PyTorch's weights: cohort train --job=THIS "
                    "--init-from=",
                    weights_path, "\n");
  }
  absl::StrAppend(&text, "name: \"",
                  std::filesystem::path(source).stem().string(),
                  "\"\nmodel {\n");
  AppendLayers(imported.model.layers(), 2, &text);
  absl::StrAppend(&text, "}\n", DataPlaceholder(imported),
                  "batch_size: 32\nepochs: 1\n",
                  "optimizer { kind: SGD lr: 0.01 momentum: 0.9 }\n");
  return text;
}

}  // namespace cohort

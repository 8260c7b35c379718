// The importer's linear maps (Gemm, MatMul + Add), Dropout and Identity,
// and the table of operators with the hints given for those cohort lacks.
#include <map>

#include "absl/strings/str_cat.h"
#include "common/onnx/onnx_importer.h"
#include "common/status_macros.h"

namespace cohort {
namespace onnx_import_internal {
namespace {

absl::Status Refuse(const std::string& label, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(label, ": ", why));
}

// The transpose of matrix `t`. It is no longer the initializer as stored,
// so it loses its name.
ConstTensor Transposed(const ConstTensor& t) {
  ConstTensor out = t;
  out.dims = {t.dims[1], t.dims[0]};
  out.source.clear();
  for (int64_t i = 0; i < t.dims[0]; ++i) {
    for (int64_t j = 0; j < t.dims[1]; ++j) {
      out.floats[j * t.dims[0] + i] = t.floats[i * t.dims[1] + j];
    }
  }
  return out;
}

// Operators cohort has no layer for, with the nearest thing it has.
const std::map<std::string, std::string>& Hints() {
  static const auto* hints = new std::map<std::string, std::string>{
      {"LogSoftmax",
       "cohort's CROSS_ENTROPY loss applies the log-softmax "
       "itself; export the logits"},
      {"LSTM",
       "cohort has no recurrent layers (transformer_block models "
       "sequences)"},
      {"GRU",
       "cohort has no recurrent layers (transformer_block models "
       "sequences)"},
      {"RNN",
       "cohort has no recurrent layers (transformer_block models "
       "sequences)"},
      {"GlobalMaxPool", "cohort has global_avgpool only"},
      {"Add",
       "adding a constant or a tensor from elsewhere; cohort's "
       "layers carry their own biases (linear, conv2d)"},
      {"Mul",
       "multiplying by a constant or a tensor from elsewhere; cohort "
       "has no scaling layer"},
  };
  return *hints;
}

}  // namespace

absl::StatusOr<std::string> Importer::MapGemm(int node, const Region& r) {
  const onnx::NodeProto& n = g_.node(node);
  const std::string label = g_.Label(node);
  const Dims& in = In(node);
  if (n.input(0) != g_.DataInputs(node)[0] || IntAttr(n, "transA", 0) != 0 ||
      FloatAttr(n, "alpha", 1) != 1 || FloatAttr(n, "beta", 1) != 1) {
    return Refuse(label,
                  "not x @ W^T + b; cohort's linear is nn.Linear "
                  "(Gemm with transB=1, alpha = beta = 1)");
  }
  ASSIGN_OR_RETURN(ConstTensor w, Weight(node, 1, {}));
  if (w.dims.size() != 2) return Refuse(label, "its weight is not a matrix");
  if (IntAttr(n, "transB", 0) == 0) w = Transposed(w);
  if (in.size() != 1 || in[0] != w.dims[1]) {
    return Refuse(label,
                  absl::StrCat("weight ", DimsString(w.dims),
                               " does not fit samples of ", DimsString(in)));
  }
  const bool bias = n.input_size() > 2 && !n.input(2).empty();
  ConstTensor b;
  if (bias) {
    ASSIGN_OR_RETURN(b, Weight(node, 2, {}));
    if (b.size() != w.dims[0]) {
      return Refuse(label, absl::StrCat("its bias ", DimsString(b.dims),
                                        " is not one per output"));
    }
    b.dims = {w.dims[0]};
  }
  LinearSpec* l = NewLayer(r)->mutable_linear();
  l->set_out_features(w.dims[0]);
  l->set_no_bias(!bias);
  AddWeight(r, "weight", w);
  if (bias) AddWeight(r, "bias", b);
  return Done(node, {w.dims[0]});
}

absl::StatusOr<std::string> Importer::MapMatMul(int node, const Region& r) {
  const onnx::NodeProto& n = g_.node(node);
  const std::string label = g_.Label(node);
  const Dims& in = In(node);
  if (n.input(0) != g_.DataInputs(node)[0]) {
    return Refuse(label,
                  "multiplies a constant by the data; cohort's linear "
                  "is x @ W^T");
  }
  // A token model's [L, D] positions each go through the same nn.Linear.
  const bool per_position = tokens_ && in.size() == 2;
  ASSIGN_OR_RETURN(const ConstTensor w, LinearWeight(node, 1));
  if (in.empty() || in.back() != w.dims[1] || in.size() > 2 ||
      (in.size() == 2 && !per_position)) {
    return Refuse(
        label, absl::StrCat("a product of samples of ", DimsString(in), " by ",
                            DimsString({w.dims[1], w.dims[0]}),
                            "; cohort's linear takes flat samples "
                            "(flatten first) or a token model's "
                            "positions"));
  }
  // torch's Linear without Gemm: MatMul then Add of the bias.
  ConstTensor b;
  const bool bias = FindBias(node, w.dims[0], r, &b);
  LinearSpec* l = NewLayer(r)->mutable_linear();
  l->set_out_features(w.dims[0]);
  l->set_no_bias(!bias);
  l->set_per_position(per_position);
  AddWeight(r, "weight", w);
  if (bias) AddWeight(r, "bias", b);
  const int last = bias ? SoleConsumer(n.output(0), r) : node;
  Dims out = in;
  out.back() = w.dims[0];
  return Done(last, out);
}

absl::StatusOr<ConstTensor> Importer::LinearWeight(int node, int i) {
  const onnx::NodeProto& n = g_.node(node);
  // torch exports x @ W^T as MatMul(x, Transpose(W)): read W itself, so
  // that it keeps its initializer's name.
  const int t = i < n.input_size() ? g_.Producer(n.input(i)) : -1;
  if (t >= 0 && g_.node(t).op_type() == "Transpose" &&
      g_.IsInitializer(g_.node(t).input(0)) &&
      IntsAttr(g_.node(t), "perm", {1, 0}) == Dims({1, 0})) {
    ASSIGN_OR_RETURN(ConstTensor w, g_.Fold(g_.node(t).input(0)));
    if (w.dims.size() != 2 || w.integer) {
      return Refuse(g_.Label(node), "its weight is not a float matrix");
    }
    w.source = g_.node(t).input(0);
    return w;
  }
  ASSIGN_OR_RETURN(ConstTensor wt, Weight(node, i, {}));
  if (wt.dims.size() != 2 || wt.integer) {
    return Refuse(g_.Label(node), "its weight is not a float matrix");
  }
  return Transposed(wt);
}

bool Importer::FindBias(int node, int64_t outputs, const Region& r,
                        ConstTensor* b) {
  const std::string out = g_.node(node).output(0);
  const int add = SoleConsumer(out, r);
  if (add < 0 || g_.node(add).op_type() != "Add" ||
      g_.DataInputs(add).size() != 1 || !CheckSideOutputs(add, r).ok()) {
    return false;
  }
  const std::string other = Other(add, out);
  absl::StatusOr<ConstTensor> t = g_.Fold(other);
  if (!t.ok() || t->size() != outputs || t->integer) return false;
  *b = *t;
  b->dims = {outputs};
  if (g_.IsInitializer(other)) b->source = other;
  return true;
}

absl::StatusOr<std::string> Importer::MapDropout(int node, const Region& r) {
  const onnx::NodeProto& n = g_.node(node);
  // Opset 12 moved the ratio from an attribute to an optional input.
  float p = FloatAttr(n, "ratio", 0.5f);
  if (n.input_size() > 1 && !n.input(1).empty()) {
    ASSIGN_OR_RETURN(const ConstTensor t, Weight(node, 1, {}));
    if (t.size() != 1)
      return Refuse(g_.Label(node), "its ratio is not a scalar");
    p = static_cast<float>(t.At(0));
  }
  if (p > 0) NewLayer(r)->mutable_dropout()->set_p(p);
  return Done(node, In(node));
}

absl::StatusOr<std::string> Importer::MapIdentity(int node, const Region&) {
  return Done(node, In(node));
}

Importer::Mapper Importer::FindMapper(const std::string& op) const {
  static const auto* table = new std::map<std::string, Mapper>{
      {"Conv", &Importer::MapConv},
      {"ConvTranspose", &Importer::MapConvTranspose},
      {"BatchNormalization", &Importer::MapBatchNorm},
      {"MaxPool", &Importer::MapPool},
      {"AveragePool", &Importer::MapPool},
      {"GlobalAveragePool", &Importer::MapGlobalPool},
      {"Flatten", &Importer::MapFlatten},
      {"Reshape", &Importer::MapReshape},
      {"Squeeze", &Importer::MapSqueeze},
      {"Gemm", &Importer::MapGemm},
      {"MatMul", &Importer::MapMatMul},
      {"Dropout", &Importer::MapDropout},
      {"Identity", &Importer::MapIdentity},
      {"Gather", &Importer::MapGather},
      {"Add", &Importer::MapAdd},
      {"LayerNormalization", &Importer::MapLayerNorm},
      {"Pad", &Importer::MapPad},
      {"Relu", &Importer::MapActivation},
      {"Sigmoid", &Importer::MapActivation},
      {"Tanh", &Importer::MapActivation},
      {"LeakyRelu", &Importer::MapActivation},
      {"Gelu", &Importer::MapActivation},
      {"HardSigmoid", &Importer::MapActivation},
      {"HardSwish", &Importer::MapActivation},
      {"Clip", &Importer::MapClip},
      {"Softmax", &Importer::MapSoftmax},
      {"PRelu", &Importer::MapPrelu},
      {"Resize", &Importer::MapResize},
      {"Upsample", &Importer::MapResize},
  };
  auto it = table->find(op);
  return it == table->end() ? nullptr : it->second;
}

std::string UnsupportedHint(const std::string& op) {
  auto it = Hints().find(op);
  return it == Hints().end() ? "" : it->second;
}

}  // namespace onnx_import_internal
}  // namespace cohort

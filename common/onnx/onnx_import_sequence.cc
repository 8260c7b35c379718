// The importer's token models: a graph whose input holds token ids [N, L]
// (nn.Embedding first) works on [N, L, D] activations, cohort's {D, L}
// sequences. nn.Embedding (Gather), a learned position table (Add),
// nn.Linear at each position (MatMul), and nn.LayerNorm over the features,
// as LayerNormalization or as the ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add
// that exports before opset 17 spell. Attention: onnx_import_attention.cc.
#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/onnx/onnx_importer.h"
#include "common/status_macros.h"

namespace cohort {
namespace onnx_import_internal {
namespace {

absl::Status Refuse(const std::string& label, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(label, ": ", why));
}

// The operators a token model may use outside attention blocks: those
// that treat the last axis as the features and the rest alike. The image
// layers' mappers read [L, D] as channels first.
bool TokenOp(const std::string& op) {
  static const auto* ops = new std::set<std::string>{
      "Gather",    "Add",      "MatMul",    "LayerNormalization",
      "Dropout",   "Identity", "Relu",      "Sigmoid",
      "Tanh",      "Gelu",     "LeakyRelu", "HardSigmoid",
      "HardSwish", "Clip"};
  return ops->count(op) > 0;
}

// Whether the axes of a ReduceMean (attribute before opset 18, input from
// 18) are the last one alone.
bool LastAxis(GraphView& g, int node, size_t rank) {
  const onnx::NodeProto& n = g.node(node);
  Dims axes = IntsAttr(n, "axes", {});
  if (n.input_size() > 1 && !n.input(1).empty()) {
    absl::StatusOr<ConstTensor> t = g.Fold(n.input(1));
    if (!t.ok() || !t->integer) return false;
    axes = t->ints;
  }
  return axes.size() == 1 &&
         (axes[0] == -1 || axes[0] == static_cast<int64_t>(rank) - 1) &&
         IntAttr(n, "keepdims", 1) == 1;
}

}  // namespace

absl::Status Importer::CheckTokenOp(int node) const {
  const std::string& op = g_.node(node).op_type();
  if (TokenOp(op)) return absl::OkStatus();
  return Refuse(g_.Label(node),
                absl::StrCat("ONNX's ", op,
                             " on the [N, L, D] activations of a token model; "
                             "cohort maps embeddings, position tables, "
                             "nn.Linear, nn.LayerNorm, activations, dropout, "
                             "residual adds and self-attention there"));
}

absl::StatusOr<std::string> Importer::MapGather(int node, const Region& r) {
  const onnx::NodeProto& n = g_.node(node);
  const std::string label = g_.Label(node);
  if (!tokens_ || n.input(1) != g_.DataInputs(node)[0] ||
      g_.Producer(n.input(1)) >= 0 || IntAttr(n, "axis", 0) != 0) {
    return Refuse(label,
                  "picks from the activations; cohort takes Gather only as "
                  "nn.Embedding on the model's token ids");
  }
  ASSIGN_OR_RETURN(ConstTensor w, Weight(node, 0, {}));
  if (w.dims.size() != 2 || w.integer) {
    return Refuse(label, "its table is not a float matrix [vocab, dim]");
  }
  EmbeddingSpec* e = NewLayer(r)->mutable_embedding();
  e->set_vocab_size(static_cast<int32_t>(w.dims[0]));
  e->set_dim(static_cast<int32_t>(w.dims[1]));
  const int64_t dim = w.dims[1];
  AddWeight(r, "weight", std::move(w));
  return Done(node, {In(node)[0], dim});
}

// A learned table added at every position: an [L, D] parameter, or
// nn.Embedding(L, D) applied to arange(L).
absl::StatusOr<ConstTensor> Importer::PositionTable(int node,
                                                    const std::string& value) {
  const std::string label = g_.Label(node);
  const Dims& in = In(node);
  const int gather = g_.Producer(value);
  std::string source = g_.IsInitializer(value) ? value : "";
  absl::StatusOr<ConstTensor> t;
  if (gather >= 0 && g_.node(gather).op_type() == "Gather" &&
      g_.IsInitializer(g_.node(gather).input(0))) {
    // nn.Embedding(L, D) of arange(L): the whole table, in order.
    absl::StatusOr<ConstTensor> idx = g_.Fold(g_.node(gather).input(1));
    t = g_.Fold(g_.node(gather).input(0));
    bool arange = idx.ok() && idx->integer && idx->size() == in[0];
    for (int64_t i = 0; arange && i < in[0]; ++i) arange = idx->ints[i] == i;
    if (arange && IntAttr(g_.node(gather), "axis", 0) == 0) {
      source = g_.node(gather).input(0);
    }
  } else {
    t = g_.Fold(value);
  }
  if (!t.ok()) return Refuse(label, std::string(t.status().message()));
  if (source.empty() || t->dims != in || t->integer) {
    return Refuse(
        label,
        absl::StrCat("adds a constant of ", DimsString(t->dims),
                     " to activations of ", DimsString(in),
                     "; cohort's positional_embedding is a learned [L, D] "
                     "table (a parameter of that shape, or nn.Embedding(L, "
                     "D) of arange(L) with L the exported length)"));
  }
  t->source = source;
  return t;
}

absl::StatusOr<std::string> Importer::MapAdd(int node, const Region& r) {
  const std::string label = g_.Label(node);
  if (!tokens_ || In(node).size() != 2) {
    return Refuse(label, UnsupportedHint("Add"));
  }
  ASSIGN_OR_RETURN(ConstTensor t,
                   PositionTable(node, Other(node, g_.DataInputs(node)[0])));
  NewLayer(r)->mutable_positional_embedding();
  AddWeight(r, "weight", std::move(t));
  return Done(node, In(node));
}

absl::StatusOr<std::string> Importer::AddLayerNorm(int node, int last,
                                                   float eps,
                                                   const ConstTensor* weight,
                                                   const ConstTensor* bias,
                                                   const Region& r) {
  const Dims& in = In(node);
  if (in.size() > 2 || (in.size() == 2 && !tokens_)) {
    return Refuse(
        g_.Label(node),
        absl::StrCat("normalises the last axis of samples of ", DimsString(in),
                     "; cohort's layernorm normalises flat samples "
                     "or the features of each position of a token "
                     "model"));
  }
  LayerNormSpec* ln = NewLayer(r)->mutable_layernorm();
  ln->set_eps(eps);
  ln->set_per_position(in.size() == 2);
  ln->set_no_affine(weight == nullptr);
  if (weight != nullptr) {
    AddWeight(r, "weight", *weight);
    AddWeight(r, "bias", *bias);
  }
  return Done(last, in);
}

absl::StatusOr<std::string> Importer::MapLayerNorm(int node, const Region& r) {
  const onnx::NodeProto& n = g_.node(node);
  const Dims& in = In(node);
  const int64_t axis = IntAttr(n, "axis", -1);
  if (axis != -1 && axis != static_cast<int64_t>(in.size())) {
    return Refuse(g_.Label(node), absl::StrCat("normalises from axis ", axis,
                                               "; cohort's layernorm takes "
                                               "the last axis"));
  }
  const Dims features = {in.back()};
  ASSIGN_OR_RETURN(ConstTensor w, Weight(node, 1, features));
  ConstTensor b;
  if (n.input_size() > 2 && !n.input(2).empty()) {
    ASSIGN_OR_RETURN(b, Weight(node, 2, features));
  } else {
    b.dims = features;
    b.floats.assign(in.back(), 0.0f);
  }
  return AddLayerNorm(node, node, FloatAttr(n, "epsilon", 1e-5f), &w, &b, r);
}

// ReduceMean(x) -> Sub(x, mean) -> Pow(2) -> ReduceMean -> Add(eps) -> Sqrt
// -> Div(Sub, Sqrt) [-> Mul(weight) -> Add(bias)]: nn.LayerNorm as exports
// before opset 17 spell it.
absl::StatusOr<std::string> Importer::MapLayerNormParts(const std::string& w,
                                                        const Region& r,
                                                        bool* matched) {
  *matched = false;
  const std::vector<int> next = Next(w, r);
  const Dims* in = g_.ShapeOf(w);
  if (next.size() != 2 || in == nullptr) return std::string();
  const size_t rank = in->size() + 1;
  for (int i = 0; i < 2; ++i) {
    const int mean = next[i], sub = next[1 - i];
    if (g_.node(mean).op_type() != "ReduceMean" || !LastAxis(g_, mean, rank) ||
        g_.node(sub).op_type() != "Sub" || g_.node(sub).input(0) != w ||
        g_.node(sub).input(1) != g_.node(mean).output(0)) {
      continue;
    }
    return MapLayerNormTail(mean, sub, r, matched);
  }
  return std::string();
}

absl::StatusOr<std::string> Importer::MapLayerNormTail(int mean, int sub,
                                                       const Region& r,
                                                       bool* matched) {
  const std::string centred = g_.node(sub).output(0);
  const Dims& in = In(mean);
  const size_t rank = in.size() + 1;
  std::vector<int> users = Next(centred, r);
  if (users.size() != 2) return std::string();
  if (g_.node(users[0]).op_type() != "Pow") std::swap(users[0], users[1]);
  const int pow = users[0], div = users[1];
  if (g_.node(pow).op_type() != "Pow" || !IsScalar(g_.node(pow).input(1), 2) ||
      g_.node(div).op_type() != "Div" || g_.node(div).input(0) != centred) {
    return std::string();
  }
  const int var = SoleConsumer(g_.node(pow).output(0), r);
  if (var < 0 || g_.node(var).op_type() != "ReduceMean" ||
      !LastAxis(g_, var, rank)) {
    return std::string();
  }
  const int add = SoleConsumer(g_.node(var).output(0), r);
  if (add < 0 || g_.node(add).op_type() != "Add") return std::string();
  absl::StatusOr<ConstTensor> eps = g_.Fold(Other(add, g_.node(var).output(0)));
  const int sqrt = SoleConsumer(g_.node(add).output(0), r);
  if (!eps.ok() || eps->size() != 1 || sqrt < 0 ||
      g_.node(sqrt).op_type() != "Sqrt" ||
      SoleConsumer(g_.node(sqrt).output(0), r) != div) {
    return std::string();
  }
  *matched = true;
  // The affine part, when the next two nodes are a Mul and an Add by
  // per-feature constants.
  const Dims features = {in.back()};
  const int mul = SoleConsumer(g_.node(div).output(0), r);
  const int plus = mul < 0 ? -1 : SoleConsumer(g_.node(mul).output(0), r);
  if (mul >= 0 && plus >= 0 && g_.node(mul).op_type() == "Mul" &&
      g_.node(plus).op_type() == "Add" && g_.DataInputs(mul).size() == 1 &&
      g_.DataInputs(plus).size() == 1) {
    absl::StatusOr<ConstTensor> weight =
        Operand(mul, g_.node(div).output(0), features);
    absl::StatusOr<ConstTensor> bias =
        Operand(plus, g_.node(mul).output(0), features);
    if (weight.ok() && bias.ok()) {
      RETURN_IF_ERROR(CheckSideOutputs(plus, r));
      return AddLayerNorm(mean, plus, static_cast<float>(eps->At(0)), &*weight,
                          &*bias, r);
    }
  }
  RETURN_IF_ERROR(CheckSideOutputs(div, r));
  return AddLayerNorm(mean, div, static_cast<float>(eps->At(0)), nullptr,
                      nullptr, r);
}

absl::StatusOr<ConstTensor> Importer::Operand(int node, const std::string& data,
                                              const Dims& want) {
  const std::string other = Other(node, data);
  ASSIGN_OR_RETURN(ConstTensor t, g_.Fold(other));
  if (t.integer || t.size() != want[0]) {
    return Refuse(g_.Label(node), "not one value per feature");
  }
  t.dims = want;
  if (g_.IsInitializer(other)) t.source = other;
  return t;
}

}  // namespace onnx_import_internal
}  // namespace cohort

// The importer's activations: single operators (Relu, Sigmoid, Clip ...)
// and the forms torch spells with several nodes (SiLU as x * sigmoid(x),
// Hardswish as x * hardsigmoid(x), GELU as x * 0.5 * (1 + erf(x / sqrt 2))).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/onnx/onnx_importer.h"
#include "common/status_macros.h"

namespace cohort {
namespace onnx_import_internal {
namespace {

absl::Status Refuse(const std::string& label, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(label, ": ", why));
}

bool Near(double x, double want) {
  return std::abs(x - want) <= 1e-4 * std::max(1.0, std::abs(want));
}

// PyTorch's Hardsigmoid: relu6(x + 3) / 6.
bool TorchHardSigmoid(const onnx::NodeProto& n) {
  return Near(FloatAttr(n, "alpha", 0.2f), 1.0 / 6) &&
         Near(FloatAttr(n, "beta", 0.5f), 0.5);
}

}  // namespace

int Importer::SoleConsumer(const std::string& value, const Region& r) const {
  if (value == r.to) return -1;
  const std::vector<int> all = g_.DataConsumers(value);
  return all.size() == 1 && (*r.allowed)[all[0]] ? all[0] : -1;
}

bool Importer::IsScalar(const std::string& value, double want) {
  if (value.empty() || g_.IsData(value)) return false;
  absl::StatusOr<ConstTensor> t = g_.Fold(value);
  return t.ok() && t->size() == 1 && Near(t->At(0), want);
}

std::string Importer::Other(int node, const std::string& value) const {
  const onnx::NodeProto& n = g_.node(node);
  if (n.input_size() != 2) return "";
  return n.input(0) == value ? n.input(1) : n.input(0);
}

absl::StatusOr<std::string> Importer::TryFused(const std::string& w,
                                               const Region& r, bool* matched) {
  ASSIGN_OR_RETURN(std::string attention, TryAttention(w, r, matched));
  if (*matched) return attention;
  ASSIGN_OR_RETURN(std::string norm, MapLayerNormParts(w, r, matched));
  if (*matched) return norm;
  const std::vector<int> next = Next(w, r);
  if (next.size() != 2) return std::string();
  for (int i = 0; i < 2; ++i) {
    const int gate = next[i], mul = next[1 - i];
    const onnx::NodeProto& g = g_.node(gate);
    const bool sigmoid = g.op_type() == "Sigmoid";
    if ((!sigmoid && g.op_type() != "HardSigmoid") ||
        g_.node(mul).op_type() != "Mul" ||
        SoleConsumer(g.output(0), r) != mul || Other(mul, g.output(0)) != w) {
      continue;
    }
    if (!sigmoid && !TorchHardSigmoid(g)) continue;
    RETURN_IF_ERROR(CheckSideOutputs(mul, r));
    LayerSpec* layer = NewLayer(r);
    if (sigmoid) {
      layer->mutable_silu();
    } else {
      layer->mutable_hardswish();
    }
    *matched = true;
    return Done(mul, *g_.ShapeOf(w));
  }
  return MapGeluErf(w, r, matched);
}

absl::StatusOr<std::string> Importer::MapGeluErf(const std::string& w,
                                                 const Region& r,
                                                 bool* matched) {
  const std::vector<int> next = Next(w, r);
  for (int i = 0; i < 2; ++i) {
    const int scale = next[i], mul = next[1 - i];
    const onnx::NodeProto& s = g_.node(scale);
    const bool div = s.op_type() == "Div" && s.input(0) == w &&
                     IsScalar(s.input(1), std::sqrt(2.0));
    const bool times =
        s.op_type() == "Mul" && IsScalar(Other(scale, w), 1 / std::sqrt(2.0));
    if (!div && !times) continue;
    const int erf = SoleConsumer(s.output(0), r);
    if (erf < 0 || g_.node(erf).op_type() != "Erf") continue;
    const int add = SoleConsumer(g_.node(erf).output(0), r);
    if (add < 0 || g_.node(add).op_type() != "Add" ||
        !IsScalar(Other(add, g_.node(erf).output(0)), 1.0)) {
      continue;
    }
    const std::string sum = g_.node(add).output(0);
    if (SoleConsumer(sum, r) != mul || g_.node(mul).op_type() != "Mul" ||
        Other(mul, sum) != w) {
      continue;
    }
    const int half = SoleConsumer(g_.node(mul).output(0), r);
    if (half < 0 || g_.node(half).op_type() != "Mul" ||
        !IsScalar(Other(half, g_.node(mul).output(0)), 0.5)) {
      continue;
    }
    RETURN_IF_ERROR(CheckSideOutputs(half, r));
    NewLayer(r)->mutable_gelu();
    *matched = true;
    return Done(half, *g_.ShapeOf(w));
  }
  return std::string();
}

absl::StatusOr<std::string> Importer::MapActivation(int node, const Region& r) {
  const onnx::NodeProto& n = g_.node(node);
  const std::string& op = n.op_type();
  const std::string label = g_.Label(node);
  if (op == "HardSigmoid" && !TorchHardSigmoid(n)) {
    return Refuse(label, absl::StrCat("alpha ", FloatAttr(n, "alpha", 0.2f),
                                      " and beta ", FloatAttr(n, "beta", 0.5f),
                                      "; cohort's hardsigmoid is PyTorch's "
                                      "(alpha 1/6, beta 0.5)"));
  }
  if (op == "Gelu" && StringAttr(n, "approximate", "none") != "none" &&
      StringAttr(n, "approximate", "none") != "tanh") {
    return Refuse(label,
                  "an unknown approximation; cohort's gelu is exact or "
                  "tanh");
  }
  LayerSpec* layer = NewLayer(r);
  if (op == "Relu") layer->mutable_relu();
  if (op == "Sigmoid") layer->mutable_sigmoid();
  if (op == "Tanh") layer->mutable_tanh();
  if (op == "LeakyRelu") {
    layer->mutable_leaky_relu()->set_negative_slope(
        FloatAttr(n, "alpha", 0.01f));
  }
  if (op == "Gelu") {
    layer->mutable_gelu()->set_tanh_approximation(
        StringAttr(n, "approximate", "none") == "tanh");
  }
  if (op == "HardSigmoid") {
    layer->mutable_hardsigmoid();
  }
  if (op == "HardSwish") {
    layer->mutable_hardswish();
  }
  return Done(node, In(node));
}

absl::StatusOr<std::string> Importer::MapClip(int node, const Region& r) {
  const onnx::NodeProto& n = g_.node(node);
  // Opset 11 moved the bounds from attributes to optional inputs.
  float lo = FloatAttr(n, "min", -INFINITY), hi = FloatAttr(n, "max", INFINITY);
  for (int i = 1; i <= 2 && i < n.input_size(); ++i) {
    if (n.input(i).empty()) continue;
    ASSIGN_OR_RETURN(const ConstTensor t, Weight(node, i, {}));
    if (t.size() != 1) return Refuse(g_.Label(node), "a bound is not a scalar");
    (i == 1 ? lo : hi) = static_cast<float>(t.At(0));
  }
  const bool relu6 = lo == 0 && hi == 6, relu = lo == 0 && std::isinf(hi);
  if (!relu6 && !relu) {
    return Refuse(g_.Label(node),
                  absl::StrCat("clips to [", lo, ", ", hi,
                               "]; cohort has relu (Clip(0)) and relu6 "
                               "(Clip(0, 6))"));
  }
  LayerSpec* layer = NewLayer(r);
  if (relu) {
    layer->mutable_relu();
  } else {
    layer->mutable_relu6();
  }
  return Done(node, In(node));
}

}  // namespace onnx_import_internal
}  // namespace cohort

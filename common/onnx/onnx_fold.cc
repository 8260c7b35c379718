// Constant folding for the importer: the constants and the shape
// arithmetic torch.onnx.export emits around reshapes (Shape, Gather,
// Unsqueeze, Concat ...) and weight transposes, evaluated on the host so
// that only layers remain.
#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/onnx/onnx_graph_view.h"
#include "common/status_macros.h"

namespace cohort {
namespace onnx_import_internal {
namespace {

absl::Status CannotFold(const std::string& label, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat(label, ": cannot fold it to a constant (", why,
                   "); cohort folds constant shape arithmetic only"));
}

// Constant's value: a tensor or one of the scalar/list forms.
absl::StatusOr<ConstTensor> ConstantValue(const onnx::NodeProto& n,
                                          const std::string& label) {
  ConstTensor c;
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (a.name() == "value") return ReadTensor(a.t());
    if (a.name() == "value_float") {
      c.floats = {a.f()};
      return c;
    }
    if (a.name() == "value_floats") {
      c.floats.assign(a.floats().begin(), a.floats().end());
      c.dims = {static_cast<int64_t>(c.floats.size())};
      return c;
    }
    c.integer = true;
    if (a.name() == "value_int") {
      c.ints = {a.i()};
      return c;
    }
    if (a.name() == "value_ints") {
      c.ints.assign(a.ints().begin(), a.ints().end());
      c.dims = {static_cast<int64_t>(c.ints.size())};
      return c;
    }
  }
  return CannotFold(label, "no value attribute cohort reads");
}

// Gather along axis 0 of a 0-D or 1-D table (x.size(0) and friends).
absl::StatusOr<ConstTensor> Gather(const ConstTensor& data,
                                   const ConstTensor& idx, int64_t axis,
                                   const std::string& label) {
  if (axis != 0 || data.dims.size() != 1 || !idx.integer) {
    return CannotFold(label, "only axis 0 of a 1-D tensor");
  }
  ConstTensor out;
  out.integer = data.integer;
  out.dims = idx.dims;
  for (int64_t i : idx.ints) {
    if (i < 0) i += data.dims[0];
    if (i < 0 || i >= data.dims[0]) return CannotFold(label, "index outside");
    if (data.integer) {
      out.ints.push_back(data.ints[i]);
    } else {
      out.floats.push_back(data.floats[i]);
    }
  }
  return out;
}

// Elementwise arithmetic with a scalar broadcast on either side; an
// operand holding the batch size gives an unknown result.
absl::StatusOr<ConstTensor> Arith(const ConstTensor& a, const ConstTensor& b,
                                  const std::string& op,
                                  const std::string& label) {
  if (a.size() != b.size() && a.size() != 1 && b.size() != 1) {
    return CannotFold(label, "operands of different sizes");
  }
  const std::function<double(double, double)> f =
      op == "Add"   ? [](double x, double y) { return x + y; }
      : op == "Sub" ? [](double x, double y) { return x - y; }
      : op == "Mul" ? [](double x, double y) { return x * y; }
                    : [](double x, double y) { return x / y; };
  ConstTensor out;
  out.integer = a.integer && b.integer;
  out.dims = a.size() >= b.size() ? a.dims : b.dims;
  const int64_t n = std::max(a.size(), b.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t ia = a.size() == 1 ? 0 : i, ib = b.size() == 1 ? 0 : i;
    if ((a.integer && a.ints[ia] == kBatchDim) ||
        (b.integer && b.ints[ib] == kBatchDim)) {
      return CannotFold(label, "arithmetic on the batch size");
    }
    const double v = f(a.At(ia), b.At(ib));
    if (out.integer) {
      out.ints.push_back(static_cast<int64_t>(v));
    } else {
      out.floats.push_back(static_cast<float>(v));
    }
  }
  return out;
}

// The 2-D transpose of a weight (torch's Linear without bias: MatMul by
// weight.t()).
absl::StatusOr<ConstTensor> Transpose2d(const ConstTensor& t,
                                        const std::vector<int64_t>& perm,
                                        const std::string& label) {
  if (t.dims.size() != 2 ||
      (!perm.empty() && perm != std::vector<int64_t>{1, 0})) {
    return CannotFold(label, "only the transpose of a matrix");
  }
  ConstTensor out = t;
  out.dims = {t.dims[1], t.dims[0]};
  for (int64_t r = 0; r < t.dims[0]; ++r) {
    for (int64_t c = 0; c < t.dims[1]; ++c) {
      const int64_t from = r * t.dims[1] + c, to = c * t.dims[0] + r;
      if (t.integer) {
        out.ints[to] = t.ints[from];
      } else {
        out.floats[to] = t.floats[from];
      }
    }
  }
  return out;
}

ConstTensor Cast(ConstTensor t, int64_t to) {
  const bool integer = to == onnx::TensorProto::INT64 ||
                       to == onnx::TensorProto::INT32 ||
                       to == onnx::TensorProto::BOOL;
  if (integer && !t.integer) {
    for (float f : t.floats) t.ints.push_back(static_cast<int64_t>(f));
    t.floats.clear();
  } else if (!integer && t.integer) {
    for (int64_t i : t.ints) t.floats.push_back(static_cast<float>(i));
    t.ints.clear();
  }
  t.integer = integer;
  return t;
}

}  // namespace

absl::StatusOr<ConstTensor> GraphView::FoldNode(int i, int output) {
  const onnx::NodeProto& n = node(i);
  const std::string& op = n.op_type();
  const std::string label = Label(i);
  if (output != 0) return CannotFold(label, "a second output");
  if (op == "Constant") return ConstantValue(n, label);
  if (op == "Shape") {
    const std::vector<int64_t>* s = ShapeOf(n.input(0));
    if (s == nullptr) return CannotFold(label, "the shape is not known yet");
    ConstTensor c;
    c.integer = true;
    c.ints.push_back(kBatchDim);
    c.ints.insert(c.ints.end(), s->begin(), s->end());
    const int64_t rank = c.ints.size();
    int64_t start = IntAttr(n, "start", 0), end = IntAttr(n, "end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, start, rank);
    c.ints = std::vector<int64_t>(c.ints.begin() + start, c.ints.begin() + end);
    c.dims = {static_cast<int64_t>(c.ints.size())};
    return c;
  }
  std::vector<ConstTensor> in;
  for (const std::string& v : n.input()) {
    if (v.empty()) continue;
    ASSIGN_OR_RETURN(ConstTensor c, Fold(v));
    in.push_back(std::move(c));
  }
  if (op == "Identity" && in.size() == 1) return in[0];
  if (op == "Cast" && in.size() == 1) return Cast(in[0], IntAttr(n, "to", 1));
  if (op == "Gather" && in.size() == 2) {
    return Gather(in[0], in[1], IntAttr(n, "axis", 0), label);
  }
  if ((op == "Unsqueeze" || op == "Squeeze") && !in.empty()) {
    // Only one-element tensors (torch's size arithmetic): no value moves.
    if (in[0].size() != 1) return CannotFold(label, "more than one element");
    ConstTensor c = in[0];
    c.dims =
        op == "Unsqueeze" ? std::vector<int64_t>{1} : std::vector<int64_t>{};
    return c;
  }
  if (op == "Concat" && !in.empty()) {
    ConstTensor c;
    c.integer = in[0].integer;
    for (const ConstTensor& t : in) {
      if (t.integer != c.integer || t.dims.size() > 1) {
        return CannotFold(label, "only 1-D tensors of one type");
      }
      c.ints.insert(c.ints.end(), t.ints.begin(), t.ints.end());
      c.floats.insert(c.floats.end(), t.floats.begin(), t.floats.end());
    }
    c.dims = {c.size()};
    return c;
  }
  if (op == "Transpose" && in.size() == 1) {
    return Transpose2d(in[0], IntsAttr(n, "perm", {}), label);
  }
  if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div") &&
      in.size() == 2) {
    return Arith(in[0], in[1], op, label);
  }
  return CannotFold(label, absl::StrCat("cohort does not evaluate ", op));
}

const onnx::AttributeProto* FindAttr(const onnx::NodeProto& node,
                                     const std::string& name) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

int64_t IntAttr(const onnx::NodeProto& node, const std::string& name,
                int64_t def) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  return a == nullptr ? def : a->i();
}

float FloatAttr(const onnx::NodeProto& node, const std::string& name,
                float def) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  return a == nullptr ? def : a->f();
}

std::vector<int64_t> IntsAttr(const onnx::NodeProto& node,
                              const std::string& name,
                              std::vector<int64_t> def) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  if (a == nullptr) return def;
  return {a->ints().begin(), a->ints().end()};
}

std::string StringAttr(const onnx::NodeProto& node, const std::string& name,
                       const std::string& def) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  return a == nullptr ? def : a->s();
}

}  // namespace onnx_import_internal
}  // namespace cohort

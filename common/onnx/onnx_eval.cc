// The evaluator (onnx_eval.h): finding and running the producers of a
// value, and the helpers its operators share (onnx_eval_ops.h).
#include "common/onnx/onnx_eval.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/onnx/onnx_eval_ops.h"
#include "common/onnx/onnx_graph_view.h"
#include "common/status_macros.h"

namespace cohort {
namespace onnx_import_internal {
namespace onnx_eval {

// About 2^62: see WholeNumbers.
constexpr double kMaxIndex = 4.6e18;

absl::Status Bad(const std::string& label, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(label, ": ", why));
}

std::string ShapeText(const Shape& d) {
  return absl::StrCat("[", absl::StrJoin(d, ", "), "]");
}

absl::StatusOr<int64_t> CountOf(const Shape& dims, const std::string& what) {
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : dims) {
    if (d < 0) {
      return Bad(what, absl::StrCat("negative dimension in ", ShapeText(dims)));
    }
    if (d == 0) {
      empty = true;
    } else if (nonzero > kMaxElements / d) {
      return Bad(what, absl::StrCat("shape ", ShapeText(dims),
                                    " holds more than 2^28 elements"));
    }
    if (d > 0) nonzero *= d;
  }
  return empty ? 0 : nonzero;
}

absl::Status CheckValue(const EvalValue& v, const std::string& what) {
  ASSIGN_OR_RETURN(int64_t n, CountOf(v.dims, what));
  if (n != static_cast<int64_t>(v.data.size())) {
    return Bad(what, absl::StrCat("holds ", v.data.size(), " values where ",
                                  ShapeText(v.dims), " makes ", n));
  }
  return absl::OkStatus();
}

absl::StatusOr<EvalValue> NewValue(Shape dims, bool integer,
                                   const std::string& label) {
  ASSIGN_OR_RETURN(int64_t n, CountOf(dims, label));
  EvalValue v;
  v.dims = std::move(dims);
  v.data.assign(n, 0.0);
  v.integer = integer;
  return v;
}

int64_t Product(const Shape& dims, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < dims.size(); ++i) n *= dims[i];
  return n;
}

Shape Strides(const Shape& d) {
  Shape s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

Shape StridesIn(const Shape& d, const Shape& out) {
  const Shape own = Strides(d);
  Shape s(out.size(), 0);
  const size_t lead = out.size() - d.size();
  for (size_t j = 0; j < d.size(); ++j) s[lead + j] = d[j] == 1 ? 0 : own[j];
  return s;
}

absl::StatusOr<Shape> BroadcastShape(const Shape& a, const Shape& b,
                                     const std::string& label) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t j = 0; j < rank; ++j) {
    const int64_t x = j + a.size() >= rank ? a[j + a.size() - rank] : 1;
    const int64_t y = j + b.size() >= rank ? b[j + b.size() - rank] : 1;
    if (x != y && x != 1 && y != 1) {
      return Bad(label, absl::StrCat("shapes ", ShapeText(a), " and ",
                                     ShapeText(b), " do not broadcast"));
    }
    out[j] = x == 1 ? y : x;
  }
  return out;
}

absl::StatusOr<EvalValue> Strided(const EvalValue& in, const Shape& dims,
                                  const Shape& strides, int64_t base,
                                  const std::string& label) {
  ASSIGN_OR_RETURN(EvalValue out, NewValue(dims, in.integer, label));
  // A mistake in a caller must not read outside `in`.
  const int64_t size = in.data.size();
  bool outside = false;
  ForEachIndex(dims, {strides}, [&](int64_t i, const Shape& off) {
    const int64_t at = base + off[0];
    outside |= at < 0 || at >= size;
    if (!outside) out.data[i] = in.data[at];
  });
  if (outside) return absl::InternalError(label + ": strided read outside");
  return out;
}

absl::StatusOr<Shape> WholeNumbers(const EvalValue& v, const std::string& label,
                                   const std::string& what) {
  Shape out;
  out.reserve(v.data.size());
  for (double x : v.data) {
    if (!std::isfinite(x) || x != std::trunc(x)) {
      return Bad(label, absl::StrCat(what, " holds ", x, ", not an integer"));
    }
    out.push_back(static_cast<int64_t>(std::clamp(x, -kMaxIndex, kMaxIndex)));
  }
  return out;
}

absl::StatusOr<Shape> IntsOf(const EvalValue& v, const std::string& label,
                             const std::string& what) {
  if (v.dims.size() > 1) {
    return Bad(label, absl::StrCat(what, " is not a 1-D tensor but ",
                                   ShapeText(v.dims)));
  }
  return WholeNumbers(v, label, what);
}

absl::StatusOr<double> ScalarOf(const EvalValue& v, const std::string& label,
                                const std::string& what) {
  if (v.data.size() != 1) {
    return Bad(label,
               absl::StrCat(what, " is not a scalar but ", ShapeText(v.dims)));
  }
  return v.data[0];
}

absl::StatusOr<int64_t> Axis(int64_t axis, int64_t rank,
                             const std::string& label) {
  if (axis < -rank || axis >= rank) {
    return Bad(label, absl::StrCat("axis ", axis,
                                   " is outside a tensor of rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

absl::StatusOr<std::vector<bool>> AxisMask(const Shape& axes, int64_t rank,
                                           const std::string& label) {
  std::vector<bool> mask(rank, false);
  for (int64_t a : axes) {
    ASSIGN_OR_RETURN(int64_t axis, Axis(a, rank, label));
    if (mask[axis]) return Bad(label, absl::StrCat("axis ", a, " repeats"));
    mask[axis] = true;
  }
  return mask;
}

absl::StatusOr<std::optional<Shape>> ArgList(const OpContext& c,
                                             const std::string& name,
                                             int64_t input_since,
                                             size_t input) {
  if (c.opset < input_since) {
    if (FindAttr(c.node, name) == nullptr) return std::nullopt;
    return IntsAttr(c.node, name, {});
  }
  if (c.Opt(input) == nullptr) return std::nullopt;
  return IntsOf(*c.Opt(input), c.label, name);
}

absl::StatusOr<EvalValue> FromTensor(const onnx::TensorProto& t,
                                     const std::string& label) {
  RETURN_IF_ERROR(CountOf(Shape(t.dims().begin(), t.dims().end()),
                          absl::StrCat(label, ": tensor ", t.name()))
                      .status());
  ASSIGN_OR_RETURN(ConstTensor c, ReadTensor(t));
  EvalValue v;
  v.dims = c.dims;
  v.integer = c.integer;
  if (c.integer) {
    v.data.assign(c.ints.begin(), c.ints.end());
  } else {
    v.data.assign(c.floats.begin(), c.floats.end());
  }
  return v;
}

}  // namespace onnx_eval

namespace {

using onnx_eval::Bad;
using onnx_eval::CheckValue;
using onnx_eval::FromTensor;
using onnx_eval::OpContext;
using onnx_eval::OpDef;
using onnx_eval::OpTable;
using onnx_eval::Outputs;

const OpTable& Ops() {
  static const OpTable* ops = [] {
    auto* table = new OpTable;
    onnx_eval::AddDataOps(table);
    onnx_eval::AddMathOps(table);
    return table;
  }();
  return *ops;
}

}  // namespace

Evaluator::Evaluator(const onnx::GraphProto& graph, int64_t opset)
    : graph_(graph), opset_(opset) {
  for (const onnx::TensorProto& t : graph_.initializer()) {
    initializers_.emplace(t.name(), &t);
  }
  for (int i = 0; i < graph_.node_size(); ++i) {
    for (const std::string& out : graph_.node(i).output()) {
      if (!out.empty()) producer_.emplace(out, i);
    }
  }
}

void Evaluator::Set(const std::string& name, EvalValue v) {
  bound_[name] = std::move(v);
  computed_.clear();
  evaluated_.clear();
}

const EvalValue* Evaluator::Find(const std::string& name) const {
  auto b = bound_.find(name);
  if (b != bound_.end()) return &b->second;
  auto c = computed_.find(name);
  return c == computed_.end() ? nullptr : &c->second;
}

absl::StatusOr<int> Evaluator::Pending(const std::string& name,
                                       const std::string& reader) {
  if (Find(name) != nullptr) return -1;
  if (auto t = initializers_.find(name); t != initializers_.end()) {
    ASSIGN_OR_RETURN(computed_[name], FromTensor(*t->second, reader));
    return -1;
  }
  auto p = producer_.find(name);
  if (p == producer_.end()) {
    return Bad(reader, absl::StrCat("reads ", name,
                                    ", which is neither bound, an initializer "
                                    "nor any node's output"));
  }
  if (evaluated_.count(p->second)) {
    return Bad(
        NodeLabel(graph_.node(p->second), p->second),
        absl::StrCat("the evaluator does not compute its output ", name));
  }
  return p->second;
}

absl::Status Evaluator::Compute(const std::string& name) {
  ASSIGN_OR_RETURN(int first, Pending(name, absl::StrCat("value ", name)));
  if (first < 0) return absl::OkStatus();
  std::vector<int> stack = {first};
  std::vector<bool> on_stack(graph_.node_size(), false);
  while (!stack.empty()) {
    const int i = stack.back();
    on_stack[i] = true;
    int next = -1;
    for (const std::string& in : graph_.node(i).input()) {
      if (in.empty()) continue;
      ASSIGN_OR_RETURN(next, Pending(in, NodeLabel(graph_.node(i), i)));
      if (next >= 0) break;
    }
    if (next >= 0 && on_stack[next]) {
      return Bad(NodeLabel(graph_.node(next), next), "it lies on a cycle");
    }
    if (next >= 0) {
      stack.push_back(next);
      continue;
    }
    RETURN_IF_ERROR(EvalNode(i));
    on_stack[i] = false;
    stack.pop_back();
  }
  return absl::OkStatus();
}

absl::Status Evaluator::EvalNode(int i) {
  const onnx::NodeProto& n = graph_.node(i);
  const std::string label = NodeLabel(n, i);
  auto op = Ops().find(n.op_type());
  if (op == Ops().end() || (!n.domain().empty() && n.domain() != "ai.onnx")) {
    return Bad(label, "the evaluator does not support this operator");
  }
  const OpDef& def = op->second;
  if (n.input_size() < def.min_inputs || n.input_size() > def.max_inputs) {
    return Bad(label, absl::StrCat("it has ", n.input_size(), " inputs"));
  }
  OpContext c{n, label, opset_, {}};
  for (int k = 0; k < n.input_size(); ++k) {
    const EvalValue* v = n.input(k).empty() ? nullptr : Find(n.input(k));
    if (v == nullptr && k < def.min_inputs) {
      return Bad(label, absl::StrCat("its input ", k, " is missing"));
    }
    if (v != nullptr) {
      RETURN_IF_ERROR(CheckValue(*v, absl::StrCat(label, ": input ", k)));
    }
    c.in.push_back(v);
  }
  ASSIGN_OR_RETURN(Outputs outs, def.fn(c));
  for (size_t o = 0;
       o < outs.size() && o < static_cast<size_t>(n.output_size()); ++o) {
    RETURN_IF_ERROR(CheckValue(outs[o], label));
    if (!n.output(o).empty()) computed_[n.output(o)] = std::move(outs[o]);
  }
  evaluated_.insert(i);
  return absl::OkStatus();
}

absl::StatusOr<EvalValue> Evaluator::Get(const std::string& name) {
  RETURN_IF_ERROR(Compute(name));
  // A node that ran without writing `name` (Dropout's mask) says so here.
  ASSIGN_OR_RETURN(int pending, Pending(name, absl::StrCat("value ", name)));
  const EvalValue* v = pending < 0 ? Find(name) : nullptr;
  if (v == nullptr)
    return absl::InternalError("value " + name + " not computed");
  RETURN_IF_ERROR(CheckValue(*v, absl::StrCat("value ", name)));
  return *v;
}

}  // namespace onnx_import_internal
}  // namespace cohort

// The evaluator's constant, shape and data-movement operators
// (onnx_eval_ops.h): torch.onnx.export's shape arithmetic, the reshapes
// and transposes around attention heads, and the makers of masks
// (ConstantOfShape, Range, Trilu). Values move by index arithmetic
// (Strided, or outer/inner blocks), never by a loop per operator layout.
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/onnx/onnx_eval_ops.h"
#include "common/onnx/onnx_graph_view.h"
#include "common/status_macros.h"

namespace cohort {
namespace onnx_import_internal {
namespace onnx_eval {
namespace {

absl::StatusOr<EvalValue> Constant(const OpContext& c) {
  for (const onnx::AttributeProto& a : c.node.attribute()) {
    const std::string& name = a.name();
    if (name == "value") return FromTensor(a.t(), c.label);
    EvalValue v;
    v.integer = name == "value_int" || name == "value_ints";
    if (name == "value_float" || name == "value_int") {
      v.data = {v.integer ? static_cast<double>(a.i()) : a.f()};
      return v;
    }
    if (name == "value_floats" || name == "value_ints") {
      if (v.integer) {
        v.data.assign(a.ints().begin(), a.ints().end());
      } else {
        v.data.assign(a.floats().begin(), a.floats().end());
      }
      v.dims = {static_cast<int64_t>(v.data.size())};
      return v;
    }
  }
  return Bad(c.label,
             "it holds no value the evaluator reads (value, value_float(s), "
             "value_int(s))");
}

absl::StatusOr<EvalValue> Identity(const OpContext& c) { return *c.in[0]; }

absl::StatusOr<EvalValue> ShapeOp(const OpContext& c) {
  const Shape& d = c.in[0]->dims;
  const int64_t rank = d.size();
  int64_t start = IntAttr(c.node, "start", 0);
  int64_t end = IntAttr(c.node, "end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  EvalValue v;
  v.integer = true;
  v.data.assign(d.begin() + start, d.begin() + end);
  v.dims = {end - start};
  return v;
}

absl::StatusOr<EvalValue> Gather(const OpContext& c) {
  const EvalValue& data = *c.in[0];
  const EvalValue& indices = *c.in[1];
  const size_t rank = data.dims.size();
  ASSIGN_OR_RETURN(int64_t axis,
                   Axis(IntAttr(c.node, "axis", 0), rank, c.label));
  const int64_t d = data.dims[axis];
  ASSIGN_OR_RETURN(Shape idx, WholeNumbers(indices, c.label, "the indices"));
  for (int64_t& i : idx) {
    if (i < -d || i >= d) {
      return Bad(c.label, absl::StrCat("index ", i, " is outside axis ", axis,
                                       " of ", ShapeText(data.dims)));
    }
    if (i < 0) i += d;
  }
  Shape dims(data.dims.begin(), data.dims.begin() + axis);
  dims.insert(dims.end(), indices.dims.begin(), indices.dims.end());
  dims.insert(dims.end(), data.dims.begin() + axis + 1, data.dims.end());
  ASSIGN_OR_RETURN(EvalValue out, NewValue(dims, data.integer, c.label));
  const int64_t outer = Product(data.dims, 0, axis);
  const int64_t inner = Product(data.dims, axis + 1, rank);
  auto to = out.data.begin();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i : idx) {
      to = std::copy_n(data.data.begin() + (o * d + i) * inner, inner, to);
    }
  }
  return out;
}

absl::StatusOr<EvalValue> Unsqueeze(const OpContext& c) {
  ASSIGN_OR_RETURN(std::optional<Shape> axes, ArgList(c, "axes", 13, 1));
  if (!axes) return Bad(c.label, "it names no axes");
  const Shape& in = c.in[0]->dims;
  const int64_t rank = in.size() + axes->size();
  ASSIGN_OR_RETURN(std::vector<bool> mask, AxisMask(*axes, rank, c.label));
  EvalValue out = *c.in[0];
  out.dims.clear();
  auto next = in.begin();
  for (int64_t a = 0; a < rank; ++a) out.dims.push_back(mask[a] ? 1 : *next++);
  return out;
}

absl::StatusOr<EvalValue> Squeeze(const OpContext& c) {
  ASSIGN_OR_RETURN(std::optional<Shape> axes, ArgList(c, "axes", 13, 1));
  const Shape& in = c.in[0]->dims;
  std::vector<bool> mask(in.size());
  for (size_t a = 0; a < in.size(); ++a) mask[a] = in[a] == 1;
  if (axes) {
    ASSIGN_OR_RETURN(mask, AxisMask(*axes, in.size(), c.label));
  }
  EvalValue out = *c.in[0];
  out.dims.clear();
  for (size_t a = 0; a < in.size(); ++a) {
    if (!mask[a]) {
      out.dims.push_back(in[a]);
    } else if (in[a] != 1) {
      return Bad(c.label, absl::StrCat("cannot squeeze axis ", a, " of ",
                                       ShapeText(in)));
    }
  }
  return out;
}

absl::StatusOr<EvalValue> Reshape(const OpContext& c) {
  const EvalValue& in = *c.in[0];
  ASSIGN_OR_RETURN(Shape shape, IntsOf(*c.in[1], c.label, "the shape"));
  const bool allow_zero = IntAttr(c.node, "allowzero", 0) != 0;
  int64_t infer = -1;
  for (size_t j = 0; j < shape.size(); ++j) {
    if (shape[j] == 0 && !allow_zero && j < in.dims.size()) {
      shape[j] = in.dims[j];
    } else if (shape[j] == -1 && infer < 0) {
      infer = j;
    } else if (shape[j] < 0 || (shape[j] == 0 && !allow_zero)) {
      return Bad(c.label,
                 absl::StrCat("shape ", ShapeText(shape),
                              " is not a target for ", ShapeText(in.dims)));
    }
  }
  const int64_t total = in.data.size();
  if (infer >= 0) {
    Shape rest = shape;
    rest[infer] = 1;
    ASSIGN_OR_RETURN(int64_t known, CountOf(rest, c.label));
    shape[infer] = known > 0 && total % known == 0 ? total / known : -1;
  }
  absl::StatusOr<int64_t> n = CountOf(shape, c.label);
  if (!n.ok() || *n != total) {
    return Bad(c.label, absl::StrCat("cannot reshape ", ShapeText(in.dims),
                                     " to ", ShapeText(shape)));
  }
  EvalValue out = in;
  out.dims = std::move(shape);
  return out;
}

absl::StatusOr<EvalValue> Transpose(const OpContext& c) {
  const EvalValue& in = *c.in[0];
  const int64_t rank = in.dims.size();
  Shape perm = IntsAttr(c.node, "perm", {});
  if (perm.empty()) {
    for (int64_t a = rank - 1; a >= 0; --a) perm.push_back(a);
  }
  if (static_cast<int64_t>(perm.size()) != rank) {
    return Bad(c.label, absl::StrCat("perm ", ShapeText(perm), " for ",
                                     ShapeText(in.dims)));
  }
  RETURN_IF_ERROR(AxisMask(perm, rank, c.label).status());
  const Shape s = Strides(in.dims);
  Shape dims(rank), strides(rank);
  for (int64_t j = 0; j < rank; ++j) {
    const int64_t from = perm[j] < 0 ? perm[j] + rank : perm[j];
    dims[j] = in.dims[from];
    strides[j] = s[from];
  }
  return Strided(in, dims, strides, 0, c.label);
}

absl::StatusOr<EvalValue> Concat(const OpContext& c) {
  const Shape& first = c.in[0]->dims;
  if (FindAttr(c.node, "axis") == nullptr) return Bad(c.label, "no axis");
  ASSIGN_OR_RETURN(int64_t axis,
                   Axis(IntAttr(c.node, "axis", 0), first.size(), c.label));
  Shape dims = first;
  dims[axis] = 0;
  bool integer = true;
  for (const EvalValue* p : c.in) {
    if (p == nullptr) return Bad(c.label, "an empty input name");
    Shape other = p->dims;
    if (other.size() == dims.size()) other[axis] = 0;
    if (other != dims) {
      return Bad(c.label,
                 absl::StrCat("inputs ", ShapeText(first), " and ",
                              ShapeText(p->dims), " differ off axis ", axis));
    }
  }
  for (const EvalValue* p : c.in) {
    dims[axis] += p->dims[axis];
    integer = integer && p->integer;
  }
  ASSIGN_OR_RETURN(EvalValue out, NewValue(dims, integer, c.label));
  const int64_t outer = Product(dims, 0, axis);
  const int64_t inner = Product(dims, axis + 1, dims.size());
  auto to = out.data.begin();
  for (int64_t o = 0; o < outer; ++o) {
    for (const EvalValue* p : c.in) {
      const int64_t block = p->dims[axis] * inner;
      to = std::copy_n(p->data.begin() + o * block, block, to);
    }
  }
  return out;
}

// Split's sizes: given (attribute or input by opset), or `num_outputs`
// parts (the last one smaller), or equal parts, one per output.
absl::StatusOr<Shape> SplitSizes(const OpContext& c, int64_t dim) {
  const int64_t parts = c.node.output_size();
  ASSIGN_OR_RETURN(std::optional<Shape> sizes, ArgList(c, "split", 13, 1));
  if (!sizes) {
    const bool uneven = FindAttr(c.node, "num_outputs") != nullptr;
    if (IntAttr(c.node, "num_outputs", parts) != parts ||
        (!uneven && dim % parts != 0)) {
      return Bad(c.label,
                 absl::StrCat("cannot split ", dim, " into ", parts, " parts"));
    }
    const int64_t chunk = (dim + parts - 1) / parts;
    sizes = Shape();
    for (int64_t k = 0; k < parts; ++k) {
      sizes->push_back(std::clamp<int64_t>(dim - k * chunk, 0, chunk));
    }
  }
  int64_t sum = 0;
  for (int64_t s : *sizes) sum += std::clamp<int64_t>(s, -1, dim + 1);
  if (static_cast<int64_t>(sizes->size()) != parts || sum != dim ||
      *std::min_element(sizes->begin(), sizes->end()) < 0) {
    return Bad(c.label, absl::StrCat("sizes ", ShapeText(*sizes), " for ",
                                     parts, " outputs do not split ", dim));
  }
  return *sizes;
}

absl::StatusOr<Outputs> Split(const OpContext& c) {
  const EvalValue& in = *c.in[0];
  ASSIGN_OR_RETURN(int64_t axis,
                   Axis(IntAttr(c.node, "axis", 0), in.dims.size(), c.label));
  if (c.node.output_size() == 0) return Bad(c.label, "no outputs");
  ASSIGN_OR_RETURN(Shape sizes, SplitSizes(c, in.dims[axis]));
  const Shape s = Strides(in.dims);
  Outputs outs;
  int64_t start = 0;
  for (int64_t size : sizes) {
    Shape dims = in.dims;
    dims[axis] = size;
    ASSIGN_OR_RETURN(EvalValue part,
                     Strided(in, dims, s, start * s[axis], c.label));
    outs.push_back(std::move(part));
    start += size;
  }
  return outs;
}

struct SliceArgs {
  Shape starts, ends, axes, steps;
};

absl::StatusOr<SliceArgs> SliceArgsOf(const OpContext& c) {
  SliceArgs s;
  if (c.opset < 10) {
    s.starts = IntsAttr(c.node, "starts", {});
    s.ends = IntsAttr(c.node, "ends", {});
    s.axes = IntsAttr(c.node, "axes", {});
  } else {
    if (c.Opt(1) == nullptr || c.Opt(2) == nullptr) {
      return Bad(c.label, "it lacks starts or ends");
    }
    ASSIGN_OR_RETURN(s.starts, IntsOf(*c.in[1], c.label, "starts"));
    ASSIGN_OR_RETURN(s.ends, IntsOf(*c.in[2], c.label, "ends"));
    if (c.Opt(3) != nullptr) {
      ASSIGN_OR_RETURN(s.axes, IntsOf(*c.in[3], c.label, "axes"));
    }
    if (c.Opt(4) != nullptr) {
      ASSIGN_OR_RETURN(s.steps, IntsOf(*c.in[4], c.label, "steps"));
    }
  }
  const size_t n = s.starts.size();
  if (s.axes.empty()) {
    for (size_t j = 0; j < n; ++j) s.axes.push_back(j);
  }
  if (s.steps.empty()) s.steps.assign(n, 1);
  if (s.ends.size() != n || s.axes.size() != n || s.steps.size() != n) {
    return Bad(c.label, "starts, ends, axes and steps differ in length");
  }
  return s;
}

absl::StatusOr<EvalValue> Slice(const OpContext& c) {
  const EvalValue& in = *c.in[0];
  const int64_t rank = in.dims.size();
  ASSIGN_OR_RETURN(SliceArgs s, SliceArgsOf(c));
  RETURN_IF_ERROR(AxisMask(s.axes, rank, c.label).status());
  const Shape own = Strides(in.dims);
  Shape dims = in.dims, strides = own;
  int64_t base = 0;
  for (size_t j = 0; j < s.axes.size(); ++j) {
    const int64_t a = s.axes[j] < 0 ? s.axes[j] + rank : s.axes[j];
    const int64_t d = in.dims[a], step = s.steps[j];
    if (step == 0) return Bad(c.label, "a step of 0");
    int64_t start = s.starts[j] < 0 ? s.starts[j] + d : s.starts[j];
    int64_t end = s.ends[j] < 0 ? s.ends[j] + d : s.ends[j];
    int64_t count = 0;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, d);
      end = std::clamp<int64_t>(end, 0, d);
      if (end > start) count = (end - start + step - 1) / step;
    } else if (d > 0) {
      start = std::clamp<int64_t>(start, 0, d - 1);
      end = std::clamp<int64_t>(end, -1, d - 1);
      if (start > end) count = (start - end - step - 1) / -step;
    }
    dims[a] = count;
    // Past the axis a step only ever takes one element: keep the stride
    // product small.
    strides[a] = own[a] * std::clamp<int64_t>(step, -d - 1, d + 1);
    if (count > 0) base += start * own[a];
  }
  return Strided(in, dims, strides, base, c.label);
}

absl::StatusOr<EvalValue> Expand(const OpContext& c) {
  const EvalValue& in = *c.in[0];
  ASSIGN_OR_RETURN(Shape shape, IntsOf(*c.in[1], c.label, "the shape"));
  ASSIGN_OR_RETURN(Shape dims, BroadcastShape(in.dims, shape, c.label));
  return Strided(in, dims, StridesIn(in.dims, dims), 0, c.label);
}

absl::StatusOr<EvalValue> ConstantOfShape(const OpContext& c) {
  ASSIGN_OR_RETURN(Shape dims, IntsOf(*c.in[0], c.label, "the shape"));
  EvalValue fill;
  fill.data = {0.0};
  if (const onnx::AttributeProto* a = FindAttr(c.node, "value")) {
    ASSIGN_OR_RETURN(fill, FromTensor(a->t(), c.label));
    if (fill.data.size() != 1) return Bad(c.label, "a value of many elements");
  }
  ASSIGN_OR_RETURN(EvalValue out, NewValue(dims, fill.integer, c.label));
  std::fill(out.data.begin(), out.data.end(), fill.data[0]);
  return out;
}

absl::StatusOr<EvalValue> Range(const OpContext& c) {
  ASSIGN_OR_RETURN(double start, ScalarOf(*c.in[0], c.label, "start"));
  ASSIGN_OR_RETURN(double limit, ScalarOf(*c.in[1], c.label, "limit"));
  ASSIGN_OR_RETURN(double delta, ScalarOf(*c.in[2], c.label, "delta"));
  const double count = std::max(std::ceil((limit - start) / delta), 0.0);
  if (delta == 0 || !(count <= kMaxElements)) {
    return Bad(c.label, absl::StrCat("a range from ", start, " to ", limit,
                                     " by ", delta));
  }
  const bool integer = c.in[0]->integer && c.in[1]->integer && c.in[2]->integer;
  ASSIGN_OR_RETURN(EvalValue out,
                   NewValue({static_cast<int64_t>(count)}, integer, c.label));
  for (size_t i = 0; i < out.data.size(); ++i) out.data[i] = start + i * delta;
  return out;
}

absl::StatusOr<EvalValue> Trilu(const OpContext& c) {
  const EvalValue& in = *c.in[0];
  if (in.dims.size() < 2) return Bad(c.label, "an input below rank 2");
  int64_t k = 0;
  if (const EvalValue* kv = c.Opt(1)) {
    ASSIGN_OR_RETURN(Shape ks, WholeNumbers(*kv, c.label, "k"));
    if (ks.size() != 1) return Bad(c.label, "k is not a scalar");
    k = ks[0];
  }
  const bool upper = IntAttr(c.node, "upper", 1) != 0;
  const int64_t rows = in.dims[in.dims.size() - 2], cols = in.dims.back();
  EvalValue out = in;
  for (size_t i = 0; i < out.data.size(); ++i) {
    const int64_t col = i % cols, row = (i / cols) % rows;
    if (upper ? col - row < k : col - row > k) out.data[i] = 0;
  }
  return out;
}

}  // namespace

void AddDataOps(OpTable* ops) {
  ops->insert({
      {"Constant", {One<Constant>, 0, 0}},
      {"Identity", {One<Identity>, 1, 1}},
      {"Dropout", {One<Identity>, 1, 3}},
      {"Shape", {One<ShapeOp>, 1, 1}},
      {"Gather", {One<Gather>, 2, 2}},
      {"Unsqueeze", {One<Unsqueeze>, 1, 2}},
      {"Squeeze", {One<Squeeze>, 1, 2}},
      {"Reshape", {One<Reshape>, 2, 2}},
      {"Transpose", {One<Transpose>, 1, 1}},
      {"Concat", {One<Concat>, 1, kManyInputs}},
      {"Split", {Split, 1, 2}},
      {"Slice", {One<Slice>, 1, 5}},
      {"Expand", {One<Expand>, 2, 2}},
      {"ConstantOfShape", {One<ConstantOfShape>, 1, 1}},
      {"Range", {One<Range>, 3, 3}},
      {"Trilu", {One<Trilu>, 1, 2}},
  });
}

}  // namespace onnx_eval
}  // namespace onnx_import_internal
}  // namespace cohort

// The evaluator's arithmetic operators (onnx_eval_ops.h): elementwise
// families over numpy broadcasting, matrix products, Softmax,
// LayerNormalization and the reductions, all in double.
#include <algorithm>
#include <cmath>
#include <limits>
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

absl::StatusOr<EvalValue> Where(const OpContext& c) {
  const EvalValue &cond = *c.in[0], &x = *c.in[1], &y = *c.in[2];
  ASSIGN_OR_RETURN(Shape xy, BroadcastShape(x.dims, y.dims, c.label));
  ASSIGN_OR_RETURN(Shape dims, BroadcastShape(cond.dims, xy, c.label));
  ASSIGN_OR_RETURN(EvalValue out,
                   NewValue(dims, x.integer && y.integer, c.label));
  ForEachIndex(dims,
               {StridesIn(cond.dims, dims), StridesIn(x.dims, dims),
                StridesIn(y.dims, dims)},
               [&](int64_t i, const Shape& off) {
                 out.data[i] =
                     cond.data[off[0]] != 0 ? x.data[off[1]] : y.data[off[2]];
               });
  return out;
}

// Elementwise operators of two or more operands, folded left to right.
enum class ResultType { kLikeOperands, kBool, kLikeFirst };
struct BinaryDef {
  double (*f)(double, double);
  ResultType type;
};

const std::map<std::string, BinaryDef>& BinaryOps() {
  using R = ResultType;
  static const auto* ops = new std::map<std::string, BinaryDef>{
      {"Add", {[](double a, double b) { return a + b; }, R::kLikeOperands}},
      {"Sub", {[](double a, double b) { return a - b; }, R::kLikeOperands}},
      {"Mul", {[](double a, double b) { return a * b; }, R::kLikeOperands}},
      {"Div", {[](double a, double b) { return a / b; }, R::kLikeOperands}},
      {"Pow",
       {[](double a, double b) { return std::pow(a, b); }, R::kLikeFirst}},
      {"Max",
       {[](double a, double b) { return std::isnan(b) || b > a ? b : a; },
        R::kLikeOperands}},
      {"Min",
       {[](double a, double b) { return std::isnan(b) || b < a ? b : a; },
        R::kLikeOperands}},
      {"Equal",
       {[](double a, double b) { return a == b ? 1.0 : 0.0; }, R::kBool}},
      {"Less",
       {[](double a, double b) { return a < b ? 1.0 : 0.0; }, R::kBool}},
      {"Greater",
       {[](double a, double b) { return a > b ? 1.0 : 0.0; }, R::kBool}},
      {"And",
       {[](double a, double b) { return a != 0 && b != 0 ? 1.0 : 0.0; },
        R::kBool}},
  };
  return *ops;
}

absl::StatusOr<EvalValue> Combine(const EvalValue& a, const EvalValue& b,
                                  const BinaryDef& def,
                                  const std::string& label) {
  ASSIGN_OR_RETURN(Shape dims, BroadcastShape(a.dims, b.dims, label));
  const bool integer = def.type == ResultType::kBool ||
                       (def.type == ResultType::kLikeFirst && a.integer) ||
                       (a.integer && b.integer);
  ASSIGN_OR_RETURN(EvalValue out, NewValue(dims, integer, label));
  ForEachIndex(dims, {StridesIn(a.dims, dims), StridesIn(b.dims, dims)},
               [&](int64_t i, const Shape& off) {
                 const double v = def.f(a.data[off[0]], b.data[off[1]]);
                 out.data[i] = integer ? std::trunc(v) : v;
               });
  return out;
}

absl::StatusOr<EvalValue> Elementwise(const OpContext& c) {
  const std::string& op = c.node.op_type();
  const BinaryDef& def = BinaryOps().at(op);
  EvalValue acc = *c.in[0];
  for (size_t k = 1; k < c.in.size(); ++k) {
    if (c.in[k] == nullptr) return Bad(c.label, "an empty input name");
    const EvalValue& b = *c.in[k];
    if (op == "Div" && acc.integer && b.integer &&
        std::find(b.data.begin(), b.data.end(), 0.0) != b.data.end()) {
      return Bad(c.label, "integer division by zero");
    }
    ASSIGN_OR_RETURN(acc, Combine(acc, b, def, c.label));
  }
  return acc;
}

struct UnaryDef {
  double (*f)(double);
  bool keeps_integer;
};

const std::map<std::string, UnaryDef>& UnaryOps() {
  static const auto* ops = new std::map<std::string, UnaryDef>{
      {"Sqrt", {[](double x) { return std::sqrt(x); }, false}},
      {"Reciprocal", {[](double x) { return 1 / x; }, false}},
      {"Neg", {[](double x) { return -x; }, true}},
      {"Exp", {[](double x) { return std::exp(x); }, false}},
      {"Erf", {[](double x) { return std::erf(x); }, false}},
      {"Tanh", {[](double x) { return std::tanh(x); }, false}},
      {"Sigmoid", {[](double x) { return 1 / (1 + std::exp(-x)); }, false}},
      {"Relu", {[](double x) { return x < 0 ? 0.0 : x; }, true}},
      {"Not", {[](double x) { return x == 0 ? 1.0 : 0.0; }, true}},
  };
  return *ops;
}

absl::StatusOr<EvalValue> Unary(const OpContext& c) {
  const UnaryDef& def = UnaryOps().at(c.node.op_type());
  EvalValue out = *c.in[0];
  out.integer = out.integer && def.keeps_integer;
  for (double& x : out.data) x = def.f(x);
  return out;
}

absl::StatusOr<EvalValue> Cast(const OpContext& c) {
  using T = onnx::TensorProto;
  const int64_t to = IntAttr(c.node, "to", T::UNDEFINED);
  EvalValue out = *c.in[0];
  out.integer = true;
  if (to == T::BOOL) {
    for (double& x : out.data) x = x != 0 ? 1 : 0;
  } else if (to == T::INT8 || to == T::UINT8 || to == T::INT16 ||
             to == T::UINT16 || to == T::INT32 || to == T::UINT32 ||
             to == T::INT64 || to == T::UINT64) {
    for (double& x : out.data) x = std::trunc(x);
  } else if (to == T::FLOAT || to == T::DOUBLE || to == T::FLOAT16 ||
             to == T::BFLOAT16) {
    out.integer = false;
  } else {
    return Bad(c.label, absl::StrCat("cannot cast to element type ", to));
  }
  return out;
}

// out[m, n] = a[m, k] b[k, n] for one pair of row-major matrices.
void MatMulInto(const double* a, const double* b, double* out, int64_t m,
                int64_t k, int64_t n) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      const double x = a[i * k + p];
      for (int64_t j = 0; j < n; ++j) out[i * n + j] += x * b[p * n + j];
    }
  }
}

absl::StatusOr<EvalValue> MatMul(const OpContext& c) {
  const EvalValue &a = *c.in[0], &b = *c.in[1];
  Shape ad = a.dims, bd = b.dims;
  if (ad.empty() || bd.empty()) return Bad(c.label, "a scalar operand");
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  const int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  if (bd[bd.size() - 2] != k) {
    return Bad(c.label, absl::StrCat("operands ", ShapeText(a.dims), " and ",
                                     ShapeText(b.dims), " do not multiply"));
  }
  const Shape ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  ASSIGN_OR_RETURN(Shape dims, BroadcastShape(ab, bb, c.label));
  const Shape batch = dims;
  if (a.dims.size() > 1) dims.push_back(m);
  if (b.dims.size() > 1) dims.push_back(n);
  ASSIGN_OR_RETURN(EvalValue out,
                   NewValue(dims, a.integer && b.integer, c.label));
  if (static_cast<int64_t>(out.data.size()) >
      kMaxWork / std::max<int64_t>(k, 1)) {
    return Bad(c.label, "more than 2^32 multiply-adds");
  }
  Shape sa = StridesIn(ab, batch), sb = StridesIn(bb, batch);
  for (int64_t& s : sa) s *= m * k;
  for (int64_t& s : sb) s *= k * n;
  ForEachIndex(batch, {sa, sb}, [&](int64_t i, const Shape& off) {
    MatMulInto(a.data.data() + off[0], b.data.data() + off[1],
               out.data.data() + i * m * n, m, k, n);
  });
  return out;
}

// Gemm's A or B, transposed when its attribute says so.
absl::StatusOr<EvalValue> GemmOperand(const OpContext& c, int i,
                                      const std::string& attr) {
  const EvalValue& v = *c.in[i];
  if (v.dims.size() != 2) {
    return Bad(c.label,
               absl::StrCat("operand ", ShapeText(v.dims), " is not a matrix"));
  }
  if (IntAttr(c.node, attr, 0) == 0) return v;
  return Strided(v, {v.dims[1], v.dims[0]}, {1, v.dims[1]}, 0, c.label);
}

absl::StatusOr<EvalValue> Gemm(const OpContext& c) {
  ASSIGN_OR_RETURN(EvalValue a, GemmOperand(c, 0, "transA"));
  ASSIGN_OR_RETURN(EvalValue b, GemmOperand(c, 1, "transB"));
  const int64_t m = a.dims[0], k = a.dims[1], n = b.dims[1];
  if (b.dims[0] != k) {
    return Bad(c.label, absl::StrCat("operands ", ShapeText(a.dims), " and ",
                                     ShapeText(b.dims), " do not multiply"));
  }
  ASSIGN_OR_RETURN(EvalValue out, NewValue({m, n}, false, c.label));
  if (m * n > kMaxWork / std::max<int64_t>(k, 1)) {
    return Bad(c.label, "more than 2^32 multiply-adds");
  }
  MatMulInto(a.data.data(), b.data.data(), out.data.data(), m, k, n);
  const double alpha = FloatAttr(c.node, "alpha", 1);
  const double beta = FloatAttr(c.node, "beta", 1);
  for (double& x : out.data) x *= alpha;
  if (const EvalValue* bias = c.Opt(2)) {
    ASSIGN_OR_RETURN(Shape dims, BroadcastShape(bias->dims, out.dims, c.label));
    if (dims != out.dims) return Bad(c.label, "C does not broadcast to A B");
    ForEachIndex(dims, {StridesIn(bias->dims, dims)},
                 [&](int64_t i, const Shape& off) {
                   out.data[i] += beta * bias->data[off[0]];
                 });
  }
  return out;
}

absl::StatusOr<EvalValue> Softmax(const OpContext& c) {
  const EvalValue& in = *c.in[0];
  const size_t rank = in.dims.size();
  // Before opset 13 Softmax flattened everything from `axis` on into one
  // row; from 13 on it runs along the one axis.
  const bool legacy = c.opset < 13;
  ASSIGN_OR_RETURN(int64_t axis, Axis(IntAttr(c.node, "axis", legacy ? 1 : -1),
                                      rank, c.label));
  const int64_t outer = Product(in.dims, 0, axis);
  const int64_t len = legacy ? Product(in.dims, axis, rank) : in.dims[axis];
  const int64_t inner = legacy ? 1 : Product(in.dims, axis + 1, rank);
  EvalValue out = in;
  out.integer = false;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double* row = out.data.data() + o * len * inner + i;
      double top = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t p = 0; p < len; ++p) top = std::max(top, row[p * inner]);
      for (int64_t p = 0; p < len; ++p) {
        row[p * inner] = std::exp(row[p * inner] - top);
        sum += row[p * inner];
      }
      for (int64_t p = 0; p < len; ++p) row[p * inner] /= sum;
    }
  }
  return out;
}

absl::StatusOr<EvalValue> LayerNorm(const OpContext& c) {
  const EvalValue& x = *c.in[0];
  const size_t rank = x.dims.size();
  ASSIGN_OR_RETURN(int64_t axis,
                   Axis(IntAttr(c.node, "axis", -1), rank, c.label));
  const double eps = FloatAttr(c.node, "epsilon", 1e-5f);
  const int64_t outer = Product(x.dims, 0, axis);
  const int64_t len = Product(x.dims, axis, rank);
  EvalValue y = x;
  y.integer = false;
  for (int64_t o = 0; o < outer; ++o) {
    double* row = y.data.data() + o * len;
    double mean = 0, var = 0;
    for (int64_t p = 0; p < len; ++p) mean += row[p] / len;
    for (int64_t p = 0; p < len; ++p) var += (row[p] - mean) * (row[p] - mean);
    const double scale = 1 / std::sqrt(var / len + eps);
    for (int64_t p = 0; p < len; ++p) row[p] = (row[p] - mean) * scale;
  }
  ASSIGN_OR_RETURN(y, Combine(y, *c.in[1], BinaryOps().at("Mul"), c.label));
  if (const EvalValue* bias = c.Opt(2)) {
    ASSIGN_OR_RETURN(y, Combine(y, *bias, BinaryOps().at("Add"), c.label));
  }
  if (y.dims != x.dims) {
    return Bad(c.label, "scale or bias do not broadcast to the input");
  }
  return y;
}

absl::StatusOr<EvalValue> Reduce(const OpContext& c) {
  const bool mean = c.node.op_type() == "ReduceMean";
  const int64_t input_since = mean ? 18 : 13;
  ASSIGN_OR_RETURN(std::optional<Shape> axes,
                   ArgList(c, "axes", input_since, 1));
  const EvalValue& in = *c.in[0];
  const int64_t rank = in.dims.size();
  const bool none = !axes || axes->empty();
  if (none && IntAttr(c.node, "noop_with_empty_axes", 0) != 0) return in;
  std::vector<bool> mask(rank, true);
  if (!none) {
    ASSIGN_OR_RETURN(mask, AxisMask(*axes, rank, c.label));
  }
  Shape kept = in.dims, dropped;
  for (int64_t a = 0; a < rank; ++a) {
    if (mask[a]) kept[a] = 1;
    if (!mask[a]) dropped.push_back(in.dims[a]);
  }
  ASSIGN_OR_RETURN(EvalValue out, NewValue(kept, in.integer, c.label));
  Shape s = Strides(kept);
  for (int64_t a = 0; a < rank; ++a) s[a] = mask[a] ? 0 : s[a];
  ForEachIndex(in.dims, {s}, [&](int64_t i, const Shape& off) {
    out.data[off[0]] += in.data[i];
  });
  if (mean && !out.data.empty()) {
    const double n = static_cast<double>(in.data.size()) / out.data.size();
    for (double& x : out.data) x = out.integer ? std::trunc(x / n) : x / n;
  }
  if (IntAttr(c.node, "keepdims", 1) == 0) out.dims = dropped;
  return out;
}

}  // namespace

void AddMathOps(OpTable* ops) {
  ops->insert({
      {"Where", {One<Where>, 3, 3}},
      {"Cast", {One<Cast>, 1, 1}},
      {"MatMul", {One<MatMul>, 2, 2}},
      {"Gemm", {One<Gemm>, 2, 3}},
      {"Softmax", {One<Softmax>, 1, 1}},
      {"LayerNormalization", {One<LayerNorm>, 2, 3}},
      {"ReduceMean", {One<Reduce>, 1, 2}},
      {"ReduceSum", {One<Reduce>, 1, 2}},
  });
  for (const auto& [op, def] : BinaryOps()) {
    // Max and Min take any number of operands, the others two.
    const bool variadic = op == "Max" || op == "Min";
    (*ops)[op] =
        OpDef{One<Elementwise>, variadic ? 1 : 2, variadic ? kManyInputs : 2};
  }
  for (const auto& [op, def] : UnaryOps()) (*ops)[op] = OpDef{One<Unary>, 1, 1};
}

}  // namespace onnx_eval
}  // namespace onnx_import_internal
}  // namespace cohort

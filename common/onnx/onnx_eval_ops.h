// The evaluator's (onnx_eval.h) operators and what they share: what an
// operator sees, the table entry that finds it by op_type, and the shape
// helpers every operator family uses (broadcasting, a strided walk that
// serves the data-movement operators, checked integer arguments). The
// operators live in onnx_eval_data.cc (constants, shapes, data movement)
// and onnx_eval_math.cc (arithmetic); the helpers in onnx_eval.cc.
//
// Internal to the evaluator. Plain functions of their arguments; the
// table is built once and only read after.
#ifndef COHORT_COMMON_ONNX_ONNX_EVAL_OPS_H_
#define COHORT_COMMON_ONNX_ONNX_EVAL_OPS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/onnx/onnx_eval.h"
#include "common/status_macros.h"
#include "onnx/onnx_pb.h"

namespace cohort {
namespace onnx_import_internal {
namespace onnx_eval {

using Shape = std::vector<int64_t>;
using Outputs = std::vector<EvalValue>;

// The largest tensor the evaluator makes, and the most multiply-adds of
// one MatMul or Gemm: attention blocks are checked on tiny inputs, so
// anything near these comes from a broken or hostile graph.
inline constexpr int64_t kMaxElements = int64_t{1} << 28;
inline constexpr int64_t kMaxWork = int64_t{1} << 32;

// What an operator sees: its node and inputs (nullptr for an omitted
// optional one). Required inputs (below OpDef::min_inputs) are never null.
struct OpContext {
  const onnx::NodeProto& node;
  const std::string& label;  // NodeLabel, for messages
  int64_t opset;
  std::vector<const EvalValue*> in;

  const EvalValue* Opt(size_t i) const {
    return i < in.size() ? in[i] : nullptr;
  }
};

using OpFn = absl::StatusOr<Outputs> (*)(const OpContext&);
struct OpDef {
  OpFn fn;
  int min_inputs, max_inputs;
};
using OpTable = std::map<std::string, OpDef>;
inline constexpr int kManyInputs = 1 << 30;

// An operator of one output as an OpFn.
template <absl::StatusOr<EvalValue> (*F)(const OpContext&)>
absl::StatusOr<Outputs> One(const OpContext& c) {
  ASSIGN_OR_RETURN(EvalValue v, F(c));
  Outputs out;
  out.push_back(std::move(v));
  return out;
}

void AddDataOps(OpTable* ops);
void AddMathOps(OpTable* ops);

// InvalidArgument "label: why".
absl::Status Bad(const std::string& label, const std::string& why);
// "[2, 3]" for messages.
std::string ShapeText(const Shape& d);

// The element count of `dims`; refuses negative dims and more than
// kMaxElements. The product of the nonzero dims is bounded too, so that no
// partial product of checked dims can overflow.
absl::StatusOr<int64_t> CountOf(const Shape& dims, const std::string& what);
// Whether `v` holds as many values as its dims make.
absl::Status CheckValue(const EvalValue& v, const std::string& what);
// Zeros of `dims`, after CountOf.
absl::StatusOr<EvalValue> NewValue(Shape dims, bool integer,
                                   const std::string& label);
// `t` (an initializer or an attribute's tensor) as a value.
absl::StatusOr<EvalValue> FromTensor(const onnx::TensorProto& t,
                                     const std::string& label);

// dims[from, to) multiplied; for dims CountOf accepted.
int64_t Product(const Shape& dims, size_t from, size_t to);
// Row-major strides of `d`.
Shape Strides(const Shape& d);
// The strides of an operand of `d` walked in the order of `out`, aligned
// on the right, 0 where it broadcasts. d.size() <= out.size().
Shape StridesIn(const Shape& d, const Shape& out);
// The shape `a` and `b` broadcast to (numpy's rules).
absl::StatusOr<Shape> BroadcastShape(const Shape& a, const Shape& b,
                                     const std::string& label);

// Calls f(i, offsets) for every element i of `dims` (accepted by CountOf)
// in row-major order, with each operand's offset under its strides.
template <typename F>
void ForEachIndex(const Shape& dims, const std::vector<Shape>& strides, F f) {
  const int64_t n = Product(dims, 0, dims.size());
  const int rank = static_cast<int>(dims.size());
  Shape idx(rank, 0), off(strides.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    f(i, off);
    for (int a = rank - 1; a >= 0; --a) {
      for (size_t k = 0; k < strides.size(); ++k) off[k] += strides[k][a];
      if (++idx[a] < dims[a]) break;
      for (size_t k = 0; k < strides.size(); ++k) {
        off[k] -= strides[k][a] * dims[a];
      }
      idx[a] = 0;
    }
  }
}

// `in` read at base + the strides over `dims`: Transpose, Slice, Split,
// Expand and Gemm's transposes.
absl::StatusOr<EvalValue> Strided(const EvalValue& in, const Shape& dims,
                                  const Shape& strides, int64_t base,
                                  const std::string& label);

// The whole numbers in `v` (indices, shapes, axes, sizes), clamped to
// about +-2^62 so that torch's INT64_MAX ("to the end") survives the trip
// through double and later index arithmetic cannot overflow.
absl::StatusOr<Shape> WholeNumbers(const EvalValue& v, const std::string& label,
                                   const std::string& what);
// The same of a 0-D or 1-D `v`.
absl::StatusOr<Shape> IntsOf(const EvalValue& v, const std::string& label,
                             const std::string& what);
// The one element of `v`.
absl::StatusOr<double> ScalarOf(const EvalValue& v, const std::string& label,
                                const std::string& what);

// `axis` in [-rank, rank) made non-negative.
absl::StatusOr<int64_t> Axis(int64_t axis, int64_t rank,
                             const std::string& label);
// `axes` normalised, refusing repeats; mask[a] marks axis a.
absl::StatusOr<std::vector<bool>> AxisMask(const Shape& axes, int64_t rank,
                                           const std::string& label);
// Axes (or sizes) as attribute `name` before opset `input_since`, as input
// number `input` from it on; nullopt when not given.
absl::StatusOr<std::optional<Shape>> ArgList(const OpContext& c,
                                             const std::string& name,
                                             int64_t input_since, size_t input);

}  // namespace onnx_eval
}  // namespace onnx_import_internal
}  // namespace cohort

#endif  // COHORT_COMMON_ONNX_ONNX_EVAL_OPS_H_

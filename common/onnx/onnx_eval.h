// A small reference evaluator for ONNX subgraphs: computes any value of a
// graph in double precision from bound inputs, initializers and Constant
// nodes. The importer uses it to recognise a block (multi-head attention)
// by comparing the block's numbers with cohort's own formula, so clarity
// and safety on untrusted graphs matter here, not speed.
//
// Semantics follow ONNX (numpy-style multidirectional broadcasting where
// ONNX specifies it, negative axes) with these choices, all in double:
//   - Integer tensors (int64, int32, bool) are held as doubles: exact
//     below 2^53. Div of two integer tensors truncates toward zero (C and
//     onnxruntime, not numpy's floor) and refuses a zero divisor; Pow of an
//     integer base truncates. Cast to an integer type truncates toward zero
//     (no wraparound into narrower types), to bool gives 0/1 (NaN is true),
//     to a float type keeps the value unrounded.
//   - Dropout is the identity (inference); its mask output, and
//     LayerNormalization's mean and inverse deviation outputs, are not
//     computed (asking for them is an error).
//   - A tensor above 2^28 elements, a negative dimension, or a MatMul or
//     Gemm above 2^32 multiply-adds is refused with InvalidArgument.
//
// Internal to the importer. An Evaluator borrows the GraphProto, which
// must outlive it, and owns every value it binds or computes. Not
// thread-safe (Get memoises).
#ifndef COHORT_COMMON_ONNX_ONNX_EVAL_H_
#define COHORT_COMMON_ONNX_ONNX_EVAL_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace cohort {
namespace onnx_import_internal {

// A tensor of any element type held as doubles (int64 exact below 2^53,
// bool as 0/1), row-major.
struct EvalValue {
  std::vector<int64_t> dims;
  std::vector<double> data;
  // An int64/int32/bool element type (matters for Div, Cast, Range ...).
  bool integer = false;
};

class Evaluator {
 public:
  // Borrows `graph` (must outlive the evaluator). `opset` is the default
  // domain's version: it decides Softmax's axis meaning and whether
  // Squeeze/Unsqueeze/Split/ReduceMean/ReduceSum take axes or sizes as an
  // attribute or as an input.
  Evaluator(const onnx::GraphProto& graph, int64_t opset);

  // Binds a value by name: a graph input, or any intermediate value, where
  // evaluation then stops. Drops what was computed so far, since it may
  // depend on the value bound before.
  void Set(const std::string& name, EvalValue v);

  // The value of `name`: bound, an initializer, or computed by its producer
  // after the producers of that node's inputs (memoised, outputs of
  // multi-output nodes by name). InvalidArgument naming the node for an
  // unsupported operator, a missing input, a cycle, or shapes that do not
  // fit.
  absl::StatusOr<EvalValue> Get(const std::string& name);

 private:
  // -1 when `name` is available (bound, computed, or an initializer now
  // read), else the node that produces it. `reader` names who asks.
  absl::StatusOr<int> Pending(const std::string& name,
                              const std::string& reader);
  // Evaluates the producers `name` needs, depth first with an explicit
  // stack so that a long chain cannot overflow the call stack.
  absl::Status Compute(const std::string& name);
  absl::Status EvalNode(int node);
  const EvalValue* Find(const std::string& name) const;

  const onnx::GraphProto& graph_;
  const int64_t opset_;
  std::map<std::string, const onnx::TensorProto*> initializers_;
  std::map<std::string, int> producer_;  // the first node writing a value
  std::map<std::string, EvalValue> bound_;
  std::map<std::string, EvalValue> computed_;  // incl. initializers read
  std::set<int> evaluated_;                    // nodes already run
};

}  // namespace onnx_import_internal
}  // namespace cohort

#endif  // COHORT_COMMON_ONNX_ONNX_EVAL_H_

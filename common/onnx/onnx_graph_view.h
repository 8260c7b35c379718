// A read-only index of an ONNX graph for the importer (onnx_import.h): who
// produces and who reads each value, a topological order, which values
// carry the input's data (the rest are constants and shape arithmetic,
// folded on demand), and the per-sample shapes found so far.
//
// Internal to the importer. The view keeps a pointer to the GraphProto it
// was built from, which must outlive it. Not thread-safe (folding memoises).
#ifndef COHORT_COMMON_ONNX_ONNX_GRAPH_VIEW_H_
#define COHORT_COMMON_ONNX_ONNX_GRAPH_VIEW_H_

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace cohort {
namespace onnx_import_internal {

// The batch dimension in a folded shape tensor: torch's x.size(0).
inline constexpr int64_t kBatchDim = std::numeric_limits<int64_t>::min();

// A folded constant: an integer tensor (shapes, axes) or a float one
// (weights, scalars such as Dropout's ratio).
struct ConstTensor {
  // The initializer it was read from ("layer1.0.conv1.weight"), or "" for
  // a value computed from constants.
  std::string source;
  std::vector<int64_t> dims;
  bool integer = false;
  std::vector<int64_t> ints;
  std::vector<float> floats;

  int64_t size() const {
    return integer ? static_cast<int64_t>(ints.size())
                   : static_cast<int64_t>(floats.size());
  }
  // Element i as a double (kBatchDim stays a huge negative number).
  double At(int64_t i) const {
    return integer ? static_cast<double>(ints[i]) : floats[i];
  }
};

// "node NAME (OP)" for messages; a node without a name is called by its
// position ("node #12 (Relu)").
std::string NodeLabel(const onnx::NodeProto& node, int index);

// A node's attributes, or `def` when absent.
const onnx::AttributeProto* FindAttr(const onnx::NodeProto& node,
                                     const std::string& name);
int64_t IntAttr(const onnx::NodeProto& node, const std::string& name,
                int64_t def);
float FloatAttr(const onnx::NodeProto& node, const std::string& name,
                float def);
std::vector<int64_t> IntsAttr(const onnx::NodeProto& node,
                              const std::string& name,
                              std::vector<int64_t> def);
std::string StringAttr(const onnx::NodeProto& node, const std::string& name,
                       const std::string& def);

// The values of `t` (FLOAT, DOUBLE, FLOAT16, INT64, INT32 or BOOL; raw or
// typed storage). InvalidArgument naming the tensor for other types,
// external data, or a byte count that disagrees with the dims.
absl::StatusOr<ConstTensor> ReadTensor(const onnx::TensorProto& t);

class GraphView {
 public:
  // Indexes `graph` with `input` as the one data input. InvalidArgument
  // for a node reading a value nothing defines, a value defined twice, or
  // a cycle.
  static absl::StatusOr<GraphView> Build(const onnx::GraphProto& graph,
                                         const std::string& input);

  const onnx::GraphProto& graph() const { return *graph_; }
  // The data input's name.
  const std::string& input() const { return input_; }
  const onnx::NodeProto& node(int i) const { return graph_->node(i); }
  int num_nodes() const { return graph_->node_size(); }
  std::string Label(int i) const { return NodeLabel(node(i), i); }
  // The nodes in an order where every node follows its producers.
  const std::vector<int>& topo_order() const { return topo_; }
  int TopoRank(int node) const { return rank_[node]; }

  // Whether `value` depends on the input's data (not only on its shape).
  bool IsData(const std::string& value) const;
  bool IsDataNode(int node) const { return data_node_[node]; }
  // The producing node of `value`, -1 for the input and initializers.
  int Producer(const std::string& value) const;
  // The data nodes reading `value`, in topological order.
  std::vector<int> DataConsumers(const std::string& value) const;
  // `node`'s inputs that carry data, in order (repeats kept).
  std::vector<std::string> DataInputs(int node) const;
  bool IsInitializer(const std::string& value) const {
    return initializers_.count(value) > 0;
  }

  // The value of a constant (an initializer, a Constant node, or shape
  // arithmetic over them and the data's known shapes). InvalidArgument,
  // naming the node, for what cannot be folded.
  absl::StatusOr<ConstTensor> Fold(const std::string& value);

  // Per-sample shapes of data values, set as the importer walks the graph.
  void SetShape(const std::string& value, std::vector<int64_t> shape) {
    shapes_[value] = std::move(shape);
  }
  const std::vector<int64_t>* ShapeOf(const std::string& value) const;

 private:
  absl::Status Index();
  absl::Status Sort();
  absl::StatusOr<ConstTensor> FoldNode(int node, int output);

  const onnx::GraphProto* graph_ = nullptr;
  std::string input_;
  std::map<std::string, const onnx::TensorProto*> initializers_;
  std::map<std::string, std::pair<int, int>> producer_;  // node, output
  std::map<std::string, std::vector<int>> consumers_;
  std::vector<int> topo_, rank_;
  std::vector<bool> data_node_;
  std::map<std::string, ConstTensor> folded_;
  std::map<std::string, std::vector<int64_t>> shapes_;
};

}  // namespace onnx_import_internal
}  // namespace cohort

#endif  // COHORT_COMMON_ONNX_ONNX_GRAPH_VIEW_H_

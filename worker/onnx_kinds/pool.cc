// LayerSpec.maxpool2d, avgpool2d, maxpool1d and avgpool1d as ONNX: MaxPool
// and AveragePool.
#include <vector>

#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportPool2d(GraphBuilder& g, const LayerSpec& l,
                                         const OnnxLayerIo& io) {
  const bool max = l.has_maxpool2d();
  const PoolSpec& s = max ? l.maxpool2d() : l.avgpool2d();
  const int64_t stride = s.stride() > 0 ? s.stride() : s.kernel();
  std::string out;
  onnx::NodeProto* n = g.Node(max ? "MaxPool" : "AveragePool", {io.in}, &out);
  GraphBuilder::Ints(n, "kernel_shape", {s.kernel(), s.kernel()});
  GraphBuilder::Ints(n, "strides", {stride, stride});
  GraphBuilder::Ints(n, "pads", std::vector<int64_t>(4, s.padding()));
  // worker/layers/pool.h: padding counts in the divisor, as PyTorch.
  if (!max) GraphBuilder::Int(n, "count_include_pad", 1);
  return out;
}

absl::StatusOr<std::string> ExportPool1d(GraphBuilder& g, const LayerSpec& l,
                                         const OnnxLayerIo& io) {
  const bool max = l.has_maxpool1d();
  const PoolSpec& s = max ? l.maxpool1d() : l.avgpool1d();
  const int64_t stride = s.stride() > 0 ? s.stride() : s.kernel();
  std::string out;
  onnx::NodeProto* n = g.Node(max ? "MaxPool" : "AveragePool", {io.in}, &out);
  GraphBuilder::Ints(n, "kernel_shape", {s.kernel()});
  GraphBuilder::Ints(n, "strides", {stride});
  GraphBuilder::Ints(n, "pads", {s.padding(), s.padding()});
  if (!max) GraphBuilder::Int(n, "count_include_pad", 1);
  return out;
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kMaxpool2D, &ExportPool2d, nullptr);
COHORT_REGISTER_ONNX_LAYER(LayerSpec::kAvgpool2D, &ExportPool2d, nullptr);
COHORT_REGISTER_ONNX_LAYER(LayerSpec::kMaxpool1D, &ExportPool1d, nullptr);
COHORT_REGISTER_ONNX_LAYER(LayerSpec::kAvgpool1D, &ExportPool1d, nullptr);

}  // namespace onnx_internal
}  // namespace cohort

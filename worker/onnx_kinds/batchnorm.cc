// LayerSpec.batchnorm1d and batchnorm2d as ONNX: BatchNormalization with
// the running statistics.
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

absl::StatusOr<std::string> ExportBatchNorm(GraphBuilder& g, const LayerSpec& l,
                                            const OnnxLayerIo& io) {
  const BatchNormSpec& b =
      l.has_batchnorm1d() ? l.batchnorm1d() : l.batchnorm2d();
  return g.BatchNorm(io.in, io.prefix, b.eps() > 0 ? b.eps() : 1e-5f);
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kBatchnorm1D, &ExportBatchNorm, nullptr);
COHORT_REGISTER_ONNX_LAYER(LayerSpec::kBatchnorm2D, &ExportBatchNorm, nullptr);

}  // namespace onnx_internal
}  // namespace cohort

// LayerSpec.upsample as ONNX: Resize with constant scales [1, 1, k, k], as
// torch.onnx.export writes nn.Upsample: nearest with the asymmetric
// coordinate transform and floor rounding (input index floor(i / k)), or
// linear with half_pixel centres (PyTorch's align_corners=False).
#include "worker/onnx_graph.h"
#include "worker/onnx_layer_registry.h"

namespace cohort {
namespace onnx_internal {
namespace {

void String(onnx::NodeProto* n, const std::string& name,
            const std::string& value) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(value);
}

absl::StatusOr<std::string> ExportUpsample(GraphBuilder& g, const LayerSpec& l,
                                           const OnnxLayerIo& io) {
  const UpsampleSpec& u = l.upsample();
  const float k = static_cast<float>(u.scale());
  const std::string scales = g.Floats({4}, {1.0f, 1.0f, k, k});
  std::string out;
  // The empty second input is the region of interest, which only the
  // tf_crop_and_resize transform reads.
  onnx::NodeProto* n = g.Node("Resize", {io.in, "", scales}, &out);
  if (u.mode() == UpsampleSpec::BILINEAR) {
    String(n, "mode", "linear");
    String(n, "coordinate_transformation_mode", "half_pixel");
  } else {
    String(n, "mode", "nearest");
    String(n, "coordinate_transformation_mode", "asymmetric");
    String(n, "nearest_mode", "floor");
  }
  return out;
}

}  // namespace

COHORT_REGISTER_ONNX_LAYER(LayerSpec::kUpsample, &ExportUpsample, nullptr);

}  // namespace onnx_internal
}  // namespace cohort

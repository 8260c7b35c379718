#include "common/layer_spec_check.h"

#include "common/layer_kind.h"
#include "common/tensor_names.h"

namespace cohort {
namespace spec_internal {

absl::Status CheckLayerSpec(const LayerSpec& l, const Scope& outer,
                            const Message& parent, int index) {
  const FieldDescriptor* fd = l.GetReflection()->GetOneofFieldDescriptor(
      l, l.GetDescriptor()->oneof_decl(0));
  if (fd == nullptr) {
    return outer.Error(
        parent, "layers", index,
        "must set a layer kind (linear, conv2d, relu, ...), got none");
  }
  if (!l.name().empty()) {
    const absl::Status named = CheckLayerName(l.name());
    if (!named.ok()) {
      return outer.Nested(parent, "layers", index)
          .Error(l, "name", -1, named.message());
    }
  }
  const absl::Status tensors = CheckTensorNames(l);
  if (!tensors.ok()) {
    return outer.Nested(parent, "layers", index)
        .Error(l, "tensor_names", -1, tensors.message());
  }
  const LayerKind* kind = FindLayerKind(l);
  // relu, global_avgpool, flatten ...: no fields to check.
  if (kind == nullptr || kind->check == nullptr) return absl::OkStatus();
  return kind->check(l, outer.Nested(parent, "layers", index).Nested(fd, -1));
}

void FillLayerSpecDefaults(LayerSpec* l) {
  const LayerKind* kind = FindLayerKind(*l);
  if (kind != nullptr && kind->fill_defaults != nullptr) {
    kind->fill_defaults(l);
  }
}

}  // namespace spec_internal
}  // namespace cohort

#include "common/shape_inference.h"

#include "common/status_macros.h"
#include "google/protobuf/descriptor.h"

namespace cohort {
namespace shape_inference {

absl::Status Unfit(absl::string_view why) {
  return absl::InvalidArgumentError(why);
}

CheckedInt Elements(const std::vector<CheckedInt>& dims) {
  CheckedInt n = 1;
  for (CheckedInt d : dims) n *= d;
  return n;
}

std::vector<CheckedInt> Checked(const Shape& s) {
  return std::vector<CheckedInt>(s.begin(), s.end());
}

CheckedInt Positions(CheckedInt padded, int64_t kernel, int64_t stride) {
  if (padded.overflow()) return padded;
  return CheckedInt((padded.value() - kernel) / stride + 1);
}

absl::Status CheckSequence(const Shape& in) {
  if (in.size() == 2) return absl::OkStatus();
  return Unfit(
      "it expects a sequence {D, L} (features at each position), as an "
      "embedding gives");
}

absl::StatusOr<InferredLayer> InferElementwise(const LayerSpec& l,
                                               const Shape& in) {
  InferredLayer r;
  r.output = Checked(in);
  return r;
}

std::string KindName(const LayerSpec& l) {
  const google::protobuf::OneofDescriptor* kind =
      l.GetDescriptor()->oneof_decl(0);
  const google::protobuf::FieldDescriptor* fd =
      l.GetReflection()->GetOneofFieldDescriptor(l, kind);
  return fd != nullptr ? fd->name() : "none";
}

absl::StatusOr<LayerSizes> Settle(const InferredLayer& r, const Shape& in) {
  LayerSizes s;
  s.input = in;
  CheckedInt params = 0;
  for (CheckedInt p : r.params) {
    if (p.overflow()) return Unfit("its parameter count passes 2^63");
    s.param_tensors.push_back(p.value());
    params += p;
  }
  for (CheckedInt d : r.output) {
    if (d.overflow()) return Unfit("its output size passes 2^63");
    s.output.push_back(d.value());
  }
  const CheckedInt out = Elements(r.output);
  const CheckedInt acts = r.activations.value_or(out);
  if (params.overflow() || out.overflow() || acts.overflow()) {
    return Unfit(params.overflow() ? "its parameters pass 2^63 elements"
                                   : "its output passes 2^63 elements");
  }
  s.parameters = params.value();
  s.activations = acts.value();
  return s;
}

absl::StatusOr<LayerSizes> InferLayer(const LayerSpec& l, const Shape& in) {
  const LayerKind* kind = FindLayerKind(l);
  if (kind == nullptr) return Unfit("it names no layer kind");
  ASSIGN_OR_RETURN(const InferredLayer r, kind->infer(l, in));
  ASSIGN_OR_RETURN(LayerSizes s, Settle(r, in));
  s.kind = KindName(l);
  s.param_no_decay = r.no_decay;
  if (s.param_no_decay.empty()) {
    // Layers declare (weight, bias), in that order.
    for (size_t i = 0; i < s.param_tensors.size(); ++i) {
      s.param_no_decay.push_back(
          IsBiasOrNormParam(s.kind, i == 1 ? "bias" : "weight"));
    }
  }
  return s;
}

}  // namespace shape_inference
}  // namespace cohort

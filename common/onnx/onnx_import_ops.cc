// The importer's mapping of single ONNX operators onto cohort layers:
// BatchNorm, pooling, linear maps, dropout and reshapes (convolutions:
// onnx_import_conv.cc).
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/onnx/onnx_importer.h"
#include "common/status_macros.h"
#include "common/tensor_names.h"

namespace cohort {
namespace onnx_import_internal {
namespace {

absl::Status Refuse(const std::string& label, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(label, ": ", why));
}

int64_t Product(const Dims& d) {
  return std::accumulate(d.begin(), d.end(), int64_t{1},
                         std::multiplies<int64_t>());
}

bool AllEqual(const Dims& d) {
  return std::adjacent_find(d.begin(), d.end(), std::not_equal_to<int64_t>()) ==
         d.end();
}

// A pooling window's geometry (MaxPool, AveragePool): square, the same
// stride, padding and dilation on every side, as cohort's pools take them.
struct Window {
  int64_t kernel = 1, stride = 1, pad = 0, dilation = 1;
};

absl::StatusOr<Window> ReadWindow(const onnx::NodeProto& n,
                                  const std::string& label, const Dims& kernel,
                                  const std::string& kind) {
  const size_t k = kernel.size();
  const std::string auto_pad = StringAttr(n, "auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") {
    return Refuse(label,
                  absl::StrCat("auto_pad ", auto_pad, "; cohort's ", kind,
                               " takes explicit padding, the "
                               "same on every side"));
  }
  const Dims pads = IntsAttr(n, "pads", Dims(2 * k, 0));
  const Dims strides = IntsAttr(n, "strides", Dims(k, 1));
  const Dims dilations = IntsAttr(n, "dilations", Dims(k, 1));
  if (!AllEqual(kernel)) {
    return Refuse(label, absl::StrCat("kernel ", DimsString(kernel),
                                      " is not square; cohort's ", kind,
                                      " takes square kernels"));
  }
  if (pads.size() != 2 * k || !AllEqual(pads)) {
    return Refuse(label, absl::StrCat("pads ", DimsString(pads),
                                      " differ between sides; cohort's ", kind,
                                      " pads every side alike"));
  }
  if (strides.size() != k || !AllEqual(strides) || dilations.size() != k ||
      !AllEqual(dilations)) {
    return Refuse(label, absl::StrCat("strides ", DimsString(strides),
                                      " or dilations ", DimsString(dilations),
                                      " differ between axes; cohort's ", kind,
                                      " takes one of each"));
  }
  return Window{kernel[0], strides[0], pads[0], dilations[0]};
}

// The output size of a window over `in` (PyTorch's formula, rounding down,
// or up with ceil_mode where the last window still starts inside).
int64_t OutSize(int64_t in, const Window& w, bool ceil) {
  const int64_t span = in + 2 * w.pad - w.dilation * (w.kernel - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceil ? (span + w.stride - 1) / w.stride : span / w.stride) + 1;
  if (ceil && (out - 1) * w.stride >= in + w.pad) --out;
  return out;
}

// "[C, H, W]" with the window applied to the spatial dims.
Dims Spatial(const Dims& in, int64_t channels, const Window& w, bool ceil) {
  Dims out = {channels};
  for (size_t i = 1; i < in.size(); ++i) out.push_back(OutSize(in[i], w, ceil));
  return out;
}

float Round6(float x) {  // 1 - 0.9f is 0.100000024: write 0.1
  return std::stof(absl::StrFormat("%.6g", x));
}

}  // namespace

const Dims& Importer::In(int node) const {
  return *g_.ShapeOf(g_.DataInputs(node)[0]);
}

std::string Importer::Done(int node, Dims shape) {
  g_.SetShape(g_.node(node).output(0), std::move(shape));
  return g_.node(node).output(0);
}

absl::StatusOr<ConstTensor> Importer::Weight(int node, int i,
                                             const Dims& want) {
  const onnx::NodeProto& n = g_.node(node);
  const std::string label = g_.Label(node);
  if (i >= n.input_size() || n.input(i).empty()) {
    return Refuse(label, absl::StrCat("its input #", i, " is missing"));
  }
  if (g_.IsData(n.input(i))) {
    return Refuse(label, absl::StrCat("its input ", n.input(i),
                                      " depends on the model's input; cohort "
                                      "takes a constant (an initializer) "
                                      "there"));
  }
  absl::StatusOr<ConstTensor> t = g_.Fold(n.input(i));
  if (!t.ok()) {
    return Refuse(label, absl::StrCat("its input ", n.input(i), ": ",
                                      t.status().message()));
  }
  if (!want.empty() && t->dims != want) {
    return Refuse(label, absl::StrCat("its input ", n.input(i), " has dims ",
                                      DimsString(t->dims), " where ",
                                      DimsString(want), " fits the layer"));
  }
  if (g_.IsInitializer(n.input(i))) t->source = n.input(i);
  return t;
}

void Importer::AddWeight(const Region& r, const std::string& name,
                         ConstTensor t) {
  NameAfter(r.seq.layers->Mutable(r.seq.layers->size() - 1), name, t.source);
  if (t.integer) {
    for (int64_t v : t.ints) t.floats.push_back(static_cast<float>(v));
  }
  SafeTensor s;
  s.name = absl::StrCat(r.seq.prefix, r.seq.layers->size() - 1, ".", name);
  s.dtype = "F32";
  s.shape = t.dims;
  s.bytes.resize(t.floats.size() * sizeof(float));
  if (!t.floats.empty()) {
    std::memcpy(s.bytes.data(), t.floats.data(), s.bytes.size());
  }
  weights_.push_back(std::move(s));
}

// torch.onnx.export names each parameter's initializer by its state_dict
// key: the module's name, a dot, the parameter's ("layer1.0.conv1" +
// ".weight"). A layer whose parameters disagree on the module keeps no
// name (its tensors keep their positions').
void Importer::NameAfter(LayerSpec* layer, const std::string& param,
                         const std::string& source) {
  const std::string suffix = absl::StrCat(".", param);
  std::string module;
  if (absl::EndsWith(source, suffix) && source.size() > suffix.size()) {
    module = source.substr(0, source.size() - suffix.size());
  }
  if (module.empty() || !CheckLayerName(module).ok() ||
      unnamed_.count(layer) != 0) {
    layer->clear_name();
    unnamed_.insert(layer);
  } else if (layer->name().empty()) {
    layer->set_name(module);
  } else if (layer->name() != module) {
    layer->clear_name();
    unnamed_.insert(layer);
  }
}

absl::StatusOr<std::string> Importer::MapBatchNorm(int node, const Region& r) {
  const onnx::NodeProto& n = g_.node(node);
  const Dims& in = In(node);
  if (in.empty() || in.size() > 3) {
    return Refuse(g_.Label(node),
                  absl::StrCat("BatchNorm over samples of ", DimsString(in),
                               "; cohort has batchnorm1d ([C] or [C, L]) and "
                               "batchnorm2d ([C, H, W])"));
  }
  std::vector<ConstTensor> t;
  for (int i = 1; i <= 4; ++i) {
    ASSIGN_OR_RETURN(ConstTensor w, Weight(node, i, {in[0]}));
    t.push_back(std::move(w));
  }
  // ONNX keeps momentum * running + (1 - momentum) * batch: PyTorch's
  // momentum is 1 - ONNX's.
  const float momentum = Round6(1.0f - FloatAttr(n, "momentum", 0.9f));
  if (momentum <= 0) {
    return Refuse(g_.Label(node),
                  "momentum 0 (running statistics that never move); cohort's "
                  "batchnorm takes a momentum in (0, 1]");
  }
  LayerSpec* layer = NewLayer(r);
  BatchNormSpec* bn = in.size() == 3 ? layer->mutable_batchnorm2d()
                                     : layer->mutable_batchnorm1d();
  bn->set_eps(FloatAttr(n, "epsilon", 1e-5f));
  bn->set_momentum(momentum);
  const char* names[] = {"weight", "bias", "running_mean", "running_var"};
  for (int i = 0; i < 4; ++i) AddWeight(r, names[i], std::move(t[i]));
  return Done(node, in);
}

absl::StatusOr<std::string> Importer::MapPool(int node, const Region& r) {
  const onnx::NodeProto& n = g_.node(node);
  const std::string label = g_.Label(node);
  const bool max = n.op_type() == "MaxPool";
  const Dims& in = In(node);
  const Dims kernel = IntsAttr(n, "kernel_shape", {});
  if ((in.size() != 2 && in.size() != 3) || kernel.size() + 1 != in.size()) {
    return Refuse(label,
                  absl::StrCat("pooling over samples of ", DimsString(in),
                               "; cohort pools [C, L] "
                               "and [C, H, W]"));
  }
  const std::string kind =
      absl::StrCat(max ? "maxpool" : "avgpool", kernel.size(), "d");
  ASSIGN_OR_RETURN(Window w, ReadWindow(n, label, kernel, kind));
  const int64_t padded = std::exchange(pending_pad_, 0);
  w.pad += padded;
  if (w.dilation != 1) {
    return Refuse(label, absl::StrCat("dilation ", w.dilation, "; cohort's ",
                                      kind, " takes none"));
  }
  if (!max && w.pad > padded && IntAttr(n, "count_include_pad", 0) == 0) {
    return Refuse(label, absl::StrCat("count_include_pad=False with padding; "
                                      "cohort's ",
                                      kind,
                                      " counts the padding "
                                      "(PyTorch's default)"));
  }
  const Dims out = Spatial(in, in[0], w, false);
  if (IntAttr(n, "ceil_mode", 0) != 0 && Spatial(in, in[0], w, true) != out) {
    return Refuse(label, absl::StrCat("ceil_mode=True makes ",
                                      DimsString(Spatial(in, in[0], w, true)),
                                      " where cohort's ", kind, " makes ",
                                      DimsString(out), " (it rounds down)"));
  }
  LayerSpec* layer = NewLayer(r);
  PoolSpec* p =
      kernel.size() == 2
          ? (max ? layer->mutable_maxpool2d() : layer->mutable_avgpool2d())
          : (max ? layer->mutable_maxpool1d() : layer->mutable_avgpool1d());
  p->set_kernel(w.kernel);
  p->set_stride(w.stride);
  p->set_padding(w.pad);
  return Done(node, out);
}

absl::StatusOr<std::string> Importer::MapGlobalPool(int node, const Region& r) {
  const Dims& in = In(node);
  if (in.size() != 3) {
    return Refuse(
        g_.Label(node),
        absl::StrCat("global pooling over samples of ", DimsString(in),
                     "; cohort's global_avgpool "
                     "takes [C, H, W]"));
  }
  const Dims pooled = {in[0], 1, 1};
  const int next = SoleConsumer(g_.node(node).output(0), r);
  if (next >= 0 && IsFlatten(next, pooled)) {
    RETURN_IF_ERROR(CheckSideOutputs(next, r));
    NewLayer(r)->mutable_global_avgpool();
    return Done(next, {in[0]});
  }
  // Kept [C, 1, 1] (a squeeze-and-excitation gate's input).
  NewLayer(r)->mutable_adaptive_avgpool2d()->set_output(1);
  return Done(node, pooled);
}

bool Importer::IsFlatten(int node, const Dims& in) {
  const std::string& op = g_.node(node).op_type();
  if (op == "Flatten") return IntAttr(g_.node(node), "axis", 1) == 1;
  if (op == "Squeeze") {
    const std::string& axes =
        g_.node(node).input_size() > 1 ? g_.node(node).input(1) : std::string();
    Dims a = IntsAttr(g_.node(node), "axes", {});
    if (!axes.empty()) {
      absl::StatusOr<ConstTensor> t = g_.Fold(axes);
      if (!t.ok() || !t->integer) return false;
      a = t->ints;
    }
    for (int64_t& x : a) x = x < 0 ? x + 4 : x;
    std::sort(a.begin(), a.end());
    return in.size() == 3 && in[1] == 1 && in[2] == 1 &&
           (a.empty() || a == Dims{2, 3});
  }
  if (op != "Reshape") return false;
  absl::StatusOr<Dims> out = ReshapeTarget(node, in);
  return out.ok() && *out == Dims{Product(in)};
}

absl::StatusOr<Dims> Importer::ReshapeTarget(int node, const Dims& in) {
  const std::string label = g_.Label(node);
  ASSIGN_OR_RETURN(const ConstTensor t, Weight(node, 1, {}));
  if (!t.integer || t.ints.empty()) {
    return Refuse(label, "its shape is not a list of integers");
  }
  const int64_t first = t.ints[0];
  const bool keeps_batch = first == kBatchDim || first == 0 ||
                           (export_batch_ > 0 && first == export_batch_);
  Dims out(t.ints.begin() + 1, t.ints.end());
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0 && i < in.size()) out[i] = in[i];  // ONNX: copy
    if (out[i] == -1 && infer < 0) {
      infer = i;
    } else if (out[i] <= 0) {
      return Refuse(label,
                    absl::StrCat("reshapes to ",
                                 DimsString(Dims(t.ints.begin(), t.ints.end())),
                                 ", which cohort cannot follow"));
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0 && known > 0 && Product(in) % known == 0) {
    out[infer] = Product(in) / known;
  }
  const bool batch_inferred = first == -1 && infer < 0;
  if ((!keeps_batch && !batch_inferred) || Product(out) != Product(in)) {
    return Refuse(label, absl::StrCat("reshapes samples of ", DimsString(in),
                                      " across the batch; cohort only "
                                      "flattens each sample (torch.flatten(x, "
                                      "1) or x.view(x.size(0), -1))"));
  }
  return out;
}

absl::StatusOr<std::string> Importer::ReshapeTo(int node, const Dims& in,
                                                const Dims& out,
                                                const Region& r) {
  if (out == in) return Done(node, out);
  if (out == Dims{Product(in)}) {
    NewLayer(r)->mutable_flatten();
    return Done(node, out);
  }
  return Refuse(g_.Label(node),
                absl::StrCat("reshapes samples of ", DimsString(in), " to ",
                             DimsString(out),
                             "; cohort only flattens "
                             "(torch.flatten(x, 1))"));
}

absl::StatusOr<std::string> Importer::MapFlatten(int node, const Region& r) {
  const Dims& in = In(node);
  if (IntAttr(g_.node(node), "axis", 1) != 1) {
    return Refuse(
        g_.Label(node),
        absl::StrCat("flattens from axis ", IntAttr(g_.node(node), "axis", 1),
                     "; cohort's flatten keeps the batch axis only "
                     "(torch.flatten(x, 1))"));
  }
  return ReshapeTo(node, in, {Product(in)}, r);
}

absl::StatusOr<std::string> Importer::MapReshape(int node, const Region& r) {
  const Dims in = In(node);
  ASSIGN_OR_RETURN(const Dims out, ReshapeTarget(node, in));
  return ReshapeTo(node, in, out, r);
}

absl::StatusOr<std::string> Importer::MapSqueeze(int node, const Region& r) {
  const Dims in = In(node);
  if (!IsFlatten(node, in)) {
    return Refuse(g_.Label(node),
                  absl::StrCat("squeezes samples of ", DimsString(in),
                               "; cohort takes it only after global pooling "
                               "([C, 1, 1] to [C])"));
  }
  return ReshapeTo(node, in, {in[0]}, r);
}

absl::StatusOr<std::string> Importer::MapPad(int node, const Region& r) {
  const onnx::NodeProto& n = g_.node(node);
  const std::string label = g_.Label(node);
  const Dims in = In(node);
  // Opset 11 moved the pads from an attribute to an input.
  Dims pads = IntsAttr(n, "pads", {});
  if (n.input_size() > 1 && !n.input(1).empty()) {
    ASSIGN_OR_RETURN(const ConstTensor t, Weight(node, 1, {}));
    pads = t.ints;
  }
  const size_t rank = in.size() + 1;
  bool zero_value = true;
  if (n.input_size() > 2 && !n.input(2).empty()) {
    ASSIGN_OR_RETURN(const ConstTensor t, Weight(node, 2, {}));
    zero_value = t.size() == 1 && t.At(0) == 0;
  }
  if (pads.size() != 2 * rank ||
      StringAttr(n, "mode", "constant") != "constant" || !zero_value) {
    return Refuse(label,
                  "not a zero padding; cohort pads with zeros inside "
                  "conv1d/conv2d and the pools (padding=N)");
  }
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) {
    return Done(node, in);
  }
  const Dims spatial = {pads.begin() + 2, pads.begin() + rank};
  const Dims spatial_end = {pads.begin() + rank + 2, pads.end()};
  const int next = SoleConsumer(n.output(0), r);
  const std::string next_op = next < 0 ? "" : g_.node(next).op_type();
  if (pads[0] != 0 || pads[1] != 0 || pads[rank] != 0 || pads[rank + 1] != 0 ||
      spatial != spatial_end || !AllEqual(spatial) || spatial.empty() ||
      (next_op != "Conv" && next_op != "AveragePool")) {
    return Refuse(label, absl::StrCat("pads ", DimsString(pads),
                                      "; cohort pads every spatial side alike, "
                                      "inside conv1d/conv2d and avgpool "
                                      "(padding=N)"));
  }
  pending_pad_ = spatial[0];
  // The consumer sees the unpadded shape and adds pending_pad_ itself.
  return Done(node, in);
}

}  // namespace onnx_import_internal
}  // namespace cohort

// The importer's convolutions: Conv as conv1d or conv2d (square or
// rectangular windows, explicit padding or padding SAME) and
// ConvTranspose as conv_transpose2d.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/onnx/onnx_importer.h"
#include "common/status_macros.h"

namespace cohort {
namespace onnx_import_internal {
namespace {

absl::Status Refuse(const std::string& label, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(label, ": ", why));
}

bool AllEqual(const Dims& d) {
  return std::adjacent_find(d.begin(), d.end(), std::not_equal_to<int64_t>()) ==
         d.end();
}

// A convolution's window per spatial dim, as the node gives it; padding
// before and after each dim.
struct ConvDims {
  Dims kernel, stride, begin, end;
  int64_t dilation = 1;

  int64_t Span(size_t i) const { return dilation * (kernel[i] - 1) + 1; }
  // PyTorch's padding="same" (stride 1, the odd zero after), which differs
  // from explicit padding only where some dim's sides differ.
  bool IsSame() const {
    for (size_t i = 0; i < kernel.size(); ++i) {
      const int64_t total = dilation * (kernel[i] - 1);
      if (stride[i] != 1 || begin[i] != total / 2 ||
          end[i] != total - total / 2) {
        return false;
      }
    }
    return true;
  }
  bool Symmetric() const { return begin == end; }
};

// auto_pad SAME_UPPER / SAME_LOWER as explicit pads over `in` (the spatial
// dims): the output is ceil(in / stride), the total padding split in half
// with the odd zero after (UPPER, Keras' and TensorFlow's "same") or before.
void AutoPads(const Dims& in, bool upper, ConvDims* d) {
  for (size_t i = 0; i < d->kernel.size(); ++i) {
    const int64_t out = (in[i] + d->stride[i] - 1) / d->stride[i];
    const int64_t total =
        std::max<int64_t>(0, (out - 1) * d->stride[i] + d->Span(i) - in[i]);
    const int64_t small = total / 2;
    d->begin[i] = upper ? small : total - small;
    d->end[i] = total - d->begin[i];
  }
}

// The window of Conv node `n` with `kernel` over samples `in` ([C, ...]).
absl::StatusOr<ConvDims> ReadConvDims(const onnx::NodeProto& n,
                                      const std::string& label,
                                      const Dims& kernel, const Dims& in,
                                      const std::string& kind) {
  const size_t k = kernel.size();
  ConvDims d;
  d.kernel = kernel;
  d.stride = IntsAttr(n, "strides", Dims(k, 1));
  const Dims pads = IntsAttr(n, "pads", Dims(2 * k, 0));
  const Dims dilations = IntsAttr(n, "dilations", Dims(k, 1));
  if (d.stride.size() != k || pads.size() != 2 * k || dilations.size() != k) {
    return Refuse(label, absl::StrCat("strides, pads or dilations do not "
                                      "give one value per axis of kernel ",
                                      DimsString(kernel)));
  }
  if (!AllEqual(dilations)) {
    return Refuse(label, absl::StrCat("dilations ", DimsString(dilations),
                                      " differ between axes; cohort's ", kind,
                                      " takes one dilation"));
  }
  d.dilation = dilations[0];
  d.begin = Dims(pads.begin(), pads.begin() + k);
  d.end = Dims(pads.begin() + k, pads.end());
  const std::string auto_pad = StringAttr(n, "auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    AutoPads(Dims(in.begin() + 1, in.end()), auto_pad == "SAME_UPPER", &d);
  } else if (auto_pad != "NOTSET" && auto_pad != "VALID") {
    return Refuse(label, absl::StrCat("auto_pad ", auto_pad,
                                      " is not an ONNX padding cohort knows"));
  }
  return d;
}

// Whether `d` is a window `kind` can say; one line why not.
absl::Status CheckConvDims(const ConvDims& d, const std::string& label,
                           const std::string& kind) {
  if (d.Symmetric() || (kind == "conv2d" && d.IsSame())) {
    return absl::OkStatus();
  }
  return Refuse(
      label,
      absl::StrCat("pads ", DimsString(d.begin), " before and ",
                   DimsString(d.end), " after differ; cohort's ", kind,
                   kind == "conv2d"
                       ? " pads both sides of a dim alike, or as PyTorch's "
                         "padding=\"same\" (stride 1, the odd zero after)"
                       : " pads both sides alike"));
}

// Writes `d` into `c`: the square fields where every dim agrees, else
// conv2d's [height, width] ones; padding SAME where the sides differ.
void SetWindow(const ConvDims& d, ConvSpec* c) {
  auto set = [](const Dims& v, auto square, auto* hw) {
    if (AllEqual(v)) {
      square(v[0]);
    } else {
      hw->Add(v[0]);
      hw->Add(v[1]);
    }
  };
  set(
      d.kernel, [c](int64_t v) { c->set_kernel(v); }, c->mutable_kernel_hw());
  set(
      d.stride, [c](int64_t v) { c->set_stride(v); }, c->mutable_stride_hw());
  if (!d.Symmetric()) {
    c->set_padding_mode(ConvSpec::SAME);
  } else {
    set(
        d.begin, [c](int64_t v) { c->set_padding(v); },
        c->mutable_padding_hw());
  }
  if (d.dilation > 1) c->set_dilation(d.dilation);
}

// The sample shape after window `d`: [out_channels, ...].
Dims ConvOutput(const Dims& in, int64_t out_channels, const ConvDims& d) {
  Dims out = {out_channels};
  for (size_t i = 0; i < d.kernel.size(); ++i) {
    const int64_t padded = in[i + 1] + d.begin[i] + d.end[i];
    out.push_back(padded < d.Span(i) ? 0
                                     : (padded - d.Span(i)) / d.stride[i] + 1);
  }
  return out;
}

// ConvTranspose's window: one kernel size, stride, padding and
// output_padding for both dims, as conv_transpose2d takes them.
struct TransposeWindow {
  int64_t kernel = 1, stride = 1, pad = 0, output_padding = 0;
};

absl::StatusOr<TransposeWindow> ReadTransposeWindow(const onnx::NodeProto& n,
                                                    const std::string& label,
                                                    const Dims& weight) {
  const Dims kernel =
      IntsAttr(n, "kernel_shape", Dims(weight.begin() + 2, weight.end()));
  const Dims strides = IntsAttr(n, "strides", {1, 1});
  const Dims pads = IntsAttr(n, "pads", {0, 0, 0, 0});
  const Dims output_padding = IntsAttr(n, "output_padding", {0, 0});
  const Dims dilations = IntsAttr(n, "dilations", {1, 1});
  const std::string auto_pad = StringAttr(n, "auto_pad", "NOTSET");
  if (kernel.size() != 2 || !AllEqual(kernel) || strides.size() != 2 ||
      !AllEqual(strides) || pads.size() != 4 || !AllEqual(pads) ||
      output_padding.size() != 2 || !AllEqual(output_padding) ||
      output_padding[0] >= strides[0] || dilations != Dims{1, 1} ||
      (auto_pad != "NOTSET" && auto_pad != "VALID") ||
      FindAttr(n, "output_shape") != nullptr) {
    return Refuse(
        label,
        absl::StrCat("kernel ", DimsString(kernel), ", strides ",
                     DimsString(strides), ", pads ", DimsString(pads),
                     ", output_padding ", DimsString(output_padding),
                     " and dilations ", DimsString(dilations),
                     "; cohort's conv_transpose2d takes a square kernel, one "
                     "stride, padding and output_padding (< stride) for both "
                     "dims, every side alike, dilation 1 and no output_shape "
                     "or auto_pad"));
  }
  return TransposeWindow{kernel[0], strides[0], pads[0], output_padding[0]};
}

}  // namespace

absl::StatusOr<std::string> Importer::MapConv(int node, const Region& r) {
  const onnx::NodeProto& n = g_.node(node);
  const std::string label = g_.Label(node);
  const Dims& in = In(node);
  ASSIGN_OR_RETURN(const ConstTensor w, Weight(node, 1, {}));
  const size_t k = w.dims.size() < 3 ? 0 : w.dims.size() - 2;
  if ((k != 1 && k != 2) || in.size() != k + 1) {
    return Refuse(label,
                  absl::StrCat("a convolution with weight ", DimsString(w.dims),
                               " over samples of ", DimsString(in),
                               "; cohort has conv1d over [C, L] and conv2d "
                               "over [C, H, W]"));
  }
  const std::string kind = k == 2 ? "conv2d" : "conv1d";
  const Dims kernel =
      IntsAttr(n, "kernel_shape", Dims(w.dims.begin() + 2, w.dims.end()));
  if (kernel.size() != k) {
    return Refuse(label,
                  absl::StrCat("kernel_shape ", DimsString(kernel),
                               " does not fit weight ", DimsString(w.dims)));
  }
  ASSIGN_OR_RETURN(ConvDims win, ReadConvDims(n, label, kernel, in, kind));
  const int64_t padded = std::exchange(pending_pad_, 0);
  for (size_t i = 0; i < k; ++i) {
    win.begin[i] += padded;
    win.end[i] += padded;
  }
  RETURN_IF_ERROR(CheckConvDims(win, label, kind));
  const int64_t groups = IntAttr(n, "group", 1);
  if (groups < 1 || w.dims[1] * groups != in[0] || w.dims[0] % groups != 0) {
    return Refuse(label, absl::StrCat("weight ", DimsString(w.dims),
                                      " with group ", groups, " does not fit ",
                                      in[0], " input channels"));
  }
  const bool bias = n.input_size() > 2 && !n.input(2).empty();
  ConstTensor b;
  if (bias) {
    ASSIGN_OR_RETURN(b, Weight(node, 2, {w.dims[0]}));
  }
  LayerSpec* layer = NewLayer(r);
  ConvSpec* c = k == 2 ? layer->mutable_conv2d() : layer->mutable_conv1d();
  c->set_out_channels(w.dims[0]);
  SetWindow(win, c);
  if (groups > 1) c->set_groups(groups);
  c->set_no_bias(!bias);
  AddWeight(r, "weight", w);
  if (bias) AddWeight(r, "bias", b);
  return Done(node, ConvOutput(in, w.dims[0], win));
}

absl::StatusOr<std::string> Importer::MapConvTranspose(int node,
                                                       const Region& r) {
  const onnx::NodeProto& n = g_.node(node);
  const std::string label = g_.Label(node);
  const Dims& in = In(node);
  ASSIGN_OR_RETURN(const ConstTensor w, Weight(node, 1, {}));
  const int64_t groups = IntAttr(n, "group", 1);
  if (w.dims.size() != 4 || in.size() != 3 || groups < 1 ||
      w.dims[0] != in[0] || in[0] % groups != 0) {
    return Refuse(label,
                  absl::StrCat("a transposed convolution with weight ",
                               DimsString(w.dims), " and group ", groups,
                               " over samples of ", DimsString(in),
                               "; cohort's conv_transpose2d takes "
                               "[C, H, W] and weight [C, OC / G, K, K]"));
  }
  ASSIGN_OR_RETURN(const TransposeWindow win,
                   ReadTransposeWindow(n, label, w.dims));
  const bool bias = n.input_size() > 2 && !n.input(2).empty();
  const int64_t out_channels = w.dims[1] * groups;
  ConstTensor b;
  if (bias) {
    ASSIGN_OR_RETURN(b, Weight(node, 2, {out_channels}));
  }
  Dims out = {out_channels};
  for (int d = 1; d <= 2; ++d) {
    out.push_back((in[d] - 1) * win.stride - 2 * win.pad + win.kernel +
                  win.output_padding);
    if (out.back() < 1) {
      return Refuse(
          label, absl::StrCat("padding ", win.pad,
                              " leaves no output of samples ", DimsString(in)));
    }
  }
  ConvTransposeSpec* c = NewLayer(r)->mutable_conv_transpose2d();
  c->set_out_channels(out_channels);
  c->set_kernel(win.kernel);
  c->set_stride(win.stride);
  c->set_padding(win.pad);
  if (win.output_padding > 0) c->set_output_padding(win.output_padding);
  if (groups > 1) c->set_groups(groups);
  c->set_no_bias(!bias);
  AddWeight(r, "weight", w);
  if (bias) AddWeight(r, "bias", b);
  return Done(node, out);
}

}  // namespace onnx_import_internal
}  // namespace cohort

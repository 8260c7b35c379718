#include "worker/layers/conv.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace cohort {

template <typename T>
ConvLayer<T>::ConvLayer(ConvOptions options, int spatial_dims)
    : options_(options), spatial_dims_(spatial_dims) {}

namespace {

// ", k1x7, s2x1, p0x3" (", p1,1,2,2" for SAME's uneven sides: top, left,
// bottom, right), leaving out a stride of 1 and no padding.
std::string WindowName(const ConvWindow& w) {
  std::string name = absl::StrCat(", k", w.kernel_h, "x", w.kernel_w);
  if (w.stride_h != 1 || w.stride_w != 1) {
    absl::StrAppend(&name, ", s", w.stride_h, "x", w.stride_w);
  }
  if (!w.Symmetric()) {
    absl::StrAppend(&name, ", p", w.pad_top, ",", w.pad_left, ",", w.pad_bottom,
                    ",", w.pad_right);
  } else if (w.pad_top != 0 || w.pad_left != 0) {
    absl::StrAppend(&name, ", p", w.pad_top, "x", w.pad_left);
  }
  if (w.dilation != 1) absl::StrAppend(&name, ", d", w.dilation);
  return name;
}

// The kernels take extra zeros after (SAME's odd one), never before.
bool WindowOk(const ConvWindow& w) {
  return std::min({w.kernel_h, w.kernel_w, w.stride_h, w.stride_w,
                   w.dilation}) > 0 &&
         std::min(w.pad_top, w.pad_left) >= 0 && w.pad_bottom >= w.pad_top &&
         w.pad_right >= w.pad_left;
}

}  // namespace

template <typename T>
std::string ConvLayer<T>::Name() const {
  std::string name =
      absl::StrCat("conv", spatial_dims_, "d(",
                   configured_ ? absl::StrCat(geometry_.in_channels) : "?",
                   "->", options_.out_channels);
  if (options_.window.has_value()) {
    absl::StrAppend(&name, WindowName(*options_.window));
  } else {
    absl::StrAppend(&name, ", k", options_.kernel);
    if (options_.stride != 1) absl::StrAppend(&name, ", s", options_.stride);
    if (options_.padding != 0) {
      absl::StrAppend(&name, ", p", options_.padding);
    }
  }
  if (options_.groups != 1) absl::StrAppend(&name, ", g", options_.groups);
  if (options_.dilation != 1 && !options_.window.has_value()) {
    absl::StrAppend(&name, ", d", options_.dilation);
  }
  if (!options_.bias) absl::StrAppend(&name, ", no bias");
  return name + ")";
}

template <typename T>
absl::Status ConvLayer<T>::CheckOptions() const {
  const auto bad = [&](const char* what, int64_t v, const char* want) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": ", what, " must be ", want, ", got ", v));
  };
  if (options_.out_channels <= 0) {
    return bad("out_channels", options_.out_channels, "positive");
  }
  if (options_.window.has_value()) {
    if (!WindowOk(*options_.window) || spatial_dims_ != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          Name(),
          ": a [height, width] window needs conv2d, a positive "
          "kernel, stride and dilation, and as much padding after as "
          "before"));
    }
  } else {
    if (options_.kernel <= 0) {
      return bad("kernel", options_.kernel, "positive");
    }
    if (options_.stride <= 0) {
      return bad("stride", options_.stride, "positive");
    }
    if (options_.padding < 0) {
      return bad("padding", options_.padding, "zero or more");
    }
    if (options_.dilation <= 0) {
      return bad("dilation", options_.dilation, "positive");
    }
  }
  if (options_.groups <= 0) return bad("groups", options_.groups, "positive");
  if (options_.out_channels % options_.groups != 0) {
    return bad("out_channels", options_.out_channels, "a multiple of groups");
  }
  return absl::OkStatus();
}

template <typename T>
void ConvLayer<T>::SetWindow(ConvGeometry* g) const {
  const bool two_d = spatial_dims_ == 2;
  if (!options_.window.has_value()) {
    g->kernel_h = two_d ? options_.kernel : 1;
    g->kernel_w = options_.kernel;
    g->stride = options_.stride;
    g->pad_h = two_d ? options_.padding : 0;
    g->pad_w = options_.padding;
    g->dilation = options_.dilation;
    return;
  }
  const ConvWindow& w = *options_.window;
  g->kernel_h = w.kernel_h;
  g->kernel_w = w.kernel_w;
  g->stride = w.stride_w;
  g->stride_h = w.stride_h == w.stride_w ? 0 : w.stride_h;
  g->pad_h = w.pad_top;
  g->pad_w = w.pad_left;
  g->extra_h = w.pad_bottom - w.pad_top;
  g->extra_w = w.pad_right - w.pad_left;
  g->dilation = w.dilation;
}

template <typename T>
absl::StatusOr<Shape> ConvLayer<T>::Configure(const Shape& in) {
  if (absl::Status s = CheckOptions(); !s.ok()) return s;
  const bool two_d = spatial_dims_ == 2;
  if (in.size() != static_cast<size_t>(spatial_dims_) + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": expects a per-sample input ", two_d ? "{C, H, W}" : "{C, L}",
        " but got ", ShapeString(in)));
  }
  for (int64_t d : in) {
    if (d <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          Name(), ": input ", ShapeString(in), " has an empty dimension"));
    }
  }
  if (in[0] % options_.groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": ", in[0], " input channels are not a multiple of groups ",
        options_.groups));
  }
  ConvGeometry g;
  g.in_channels = in[0];
  g.in_h = two_d ? in[1] : 1;
  g.in_w = in.back();
  g.out_channels = options_.out_channels;
  g.groups = options_.groups;
  SetWindow(&g);
  geometry_ = g;
  configured_ = true;  // Name() now shows the input channels
  if (g.in_h + 2 * g.pad_h + g.extra_h < g.span_h() ||
      g.in_w + 2 * g.pad_w + g.extra_w < g.span_w()) {
    const std::string padded =
        options_.padding > 0 ? absl::StrCat(" padded by ", options_.padding)
                             : "";
    absl::Status error = absl::InvalidArgumentError(
        absl::StrCat(Name(), ": input ", ShapeString(in), padded,
                     " is smaller than the kernel"));
    configured_ = false;
    return error;
  }
  if (two_d) return Shape{g.out_channels, g.out_h(), g.out_w()};
  return Shape{g.out_channels, g.out_w()};
}

template <typename T>
std::vector<ParamDecl> ConvLayer<T>::Params() const {
  CHECK(configured_) << Name() << ": Params() before Configure()";
  const ConvGeometry& g = geometry_;
  Shape weight_shape = {g.out_channels, g.in_channels / g.groups};
  if (spatial_dims_ == 2) weight_shape.push_back(g.kernel_h);
  weight_shape.push_back(g.kernel_w);
  std::vector<ParamDecl> params = {{"weight", std::move(weight_shape),
                                    ParamDecl::Init::kKaimingUniform,
                                    g.patch()}};
  if (options_.bias) {
    params.push_back(
        {"bias", {g.out_channels}, ParamDecl::Init::kFanInUniform, g.patch()});
  }
  return params;
}

template <typename T>
void ConvLayer<T>::Bind(std::vector<BasicTensor<T>> values,
                        std::vector<BasicTensor<T>> grads) {
  const size_t n = options_.bias ? 2 : 1;
  CHECK(values.size() == n && grads.size() == n) << Name() << ": Bind";
  weight_ = std::move(values[0]);
  grad_weight_ = std::move(grads[0]);
  if (options_.bias) {
    bias_ = std::move(values[1]);
    grad_bias_ = std::move(grads[1]);
  }
}

template <typename T>
bool ConvLayer<T>::HasShape(const BasicTensor<T>& t, int64_t channels,
                            int64_t batch, int64_t h, int64_t w) const {
  if (t.rank() != spatial_dims_ + 2 || t.dim(0) != channels ||
      t.dim(1) != batch || t.shape().back() != w) {
    return false;
  }
  return spatial_dims_ == 1 || t.dim(2) == h;
}

// Only resizes when the shape changes: building a Shape allocates, and this
// runs every step.
template <typename T>
void ConvLayer<T>::EnsureShape(BasicTensor<T>* t, int64_t channels,
                               int64_t batch, int64_t h, int64_t w) const {
  if (HasShape(*t, channels, batch, h, w)) return;
  if (spatial_dims_ == 2) {
    t->Resize({channels, batch, h, w});
  } else {
    t->Resize({channels, batch, w});
  }
}

template <typename T>
void ConvLayer<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                           Mode mode) {
  ConvGeometry& g = geometry_;
  CHECK(in.rank() == spatial_dims_ + 2)
      << Name() << ": input " << ShapeString(in.shape());
  g.batch = in.dim(1);
  CHECK(HasShape(in, g.in_channels, g.batch, g.in_h, g.in_w))
      << Name() << ": input " << ShapeString(in.shape());
  EnsureShape(out, g.out_channels, g.batch, g.out_h(), g.out_w());
  ConvForward<T>(g, in.data(), weight_.data(),
                 options_.bias ? bias_.data() : nullptr, out->data(),
                 &workspace_);
  input_ = mode == Mode::kTrain ? &in : nullptr;
}

template <typename T>
void ConvLayer<T>::Backward(const BasicTensor<T>& grad_out,
                            BasicTensor<T>* grad_in) {
  CHECK(input_ != nullptr) << Name() << ": Backward without a kTrain Forward";
  const ConvGeometry& g = geometry_;
  CHECK(HasShape(grad_out, g.out_channels, g.batch, g.out_h(), g.out_w()))
      << Name() << ": output gradient " << ShapeString(grad_out.shape());
  if (grad_in != nullptr) {
    EnsureShape(grad_in, g.in_channels, g.batch, g.in_h, g.in_w);
  }
  // The weights are the forward's: no update comes between the passes.
  ConvBackward<T>(g, grad_out.data(), weight_.data(), grad_weight_.data(),
                  options_.bias ? grad_bias_.data() : nullptr,
                  grad_in != nullptr ? grad_in->data() : nullptr, &workspace_);
}

template <typename T>
void ConvLayer<T>::ForwardScaled(const BasicTensor<T>& in, const T* scale,
                                 const T* shift, const BasicTensor<T>* residual,
                                 bool relu, BasicTensor<T>* out) {
  ConvGeometry& g = geometry_;
  g.batch = in.dim(1);
  CHECK(HasShape(in, g.in_channels, g.batch, g.in_h, g.in_w))
      << Name() << ": input " << ShapeString(in.shape());
  CHECK(!options_.bias) << Name() << ": a scaled forward folds no bias";
  EnsureShape(out, g.out_channels, g.batch, g.out_h(), g.out_w());
  CHECK(residual == nullptr || residual->size() == out->size()) << Name();
  if constexpr (std::is_same_v<T, float>) {
    ConvForwardScaled(g, in.data(), weight_.data(), scale, shift,
                      residual != nullptr ? residual->data() : nullptr, relu,
                      out->data(), &workspace_);
  } else {
    LOG(FATAL) << Name() << ": scaled forward in float only";
  }
  input_ = nullptr;
}

template class ConvLayer<float>;
template class ConvLayer<double>;

}  // namespace cohort

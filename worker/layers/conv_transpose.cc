#include "worker/layers/conv_transpose.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"

namespace cohort {

template <typename T>
std::string ConvTranspose2d<T>::Name() const {
  const ConvTransposeOptions& o = options_;
  std::string name =
      absl::StrCat("conv_transpose2d(",
                   configured_ ? absl::StrCat(geometry_.out_channels) : "?",
                   "->", o.out_channels, ", k", o.kernel);
  if (o.stride != 1) absl::StrAppend(&name, ", s", o.stride);
  if (o.padding != 0) absl::StrAppend(&name, ", p", o.padding);
  if (o.output_padding != 0) absl::StrAppend(&name, ", op", o.output_padding);
  if (o.groups != 1) absl::StrAppend(&name, ", g", o.groups);
  if (!o.bias) absl::StrAppend(&name, ", no bias");
  return name + ")";
}

template <typename T>
absl::Status ConvTranspose2d<T>::CheckOptions() const {
  const ConvTransposeOptions& o = options_;
  if (o.out_channels <= 0 || o.kernel <= 0 || o.stride <= 0 || o.groups <= 0 ||
      o.padding < 0 || o.output_padding < 0 || o.output_padding >= o.stride ||
      o.out_channels % o.groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(),
        ": out_channels, kernel, stride and groups must be positive, groups "
        "must divide out_channels, padding must not be negative and "
        "output_padding must be in [0, stride)"));
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<Shape> ConvTranspose2d<T>::Configure(const Shape& in) {
  if (absl::Status s = CheckOptions(); !s.ok()) return s;
  const ConvTransposeOptions& o = options_;
  if (in.size() != 3 || in[0] <= 0 || in[1] <= 0 || in[2] <= 0 ||
      in[0] % o.groups != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(),
                     ": expects a per-sample input {C, H, W} with C a "
                     "multiple of groups, got ",
                     ShapeString(in)));
  }
  const int64_t grown_h = (in[1] - 1) * o.stride + o.kernel + o.output_padding;
  const int64_t grown_w = (in[2] - 1) * o.stride + o.kernel + o.output_padding;
  if (grown_h <= 2 * o.padding || grown_w <= 2 * o.padding) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": padding ", o.padding, " leaves no output of ",
                     ShapeString(in)));
  }
  ConvGeometry g;
  g.in_channels = o.out_channels;
  g.in_h = grown_h - 2 * o.padding;
  g.in_w = grown_w - 2 * o.padding;
  g.out_channels = in[0];
  g.kernel_h = g.kernel_w = o.kernel;
  g.stride = o.stride;
  g.pad_h = g.pad_w = o.padding;
  g.groups = o.groups;
  // output_padding < stride makes the convolution map the output size back
  // onto the input size exactly.
  DCHECK(g.out_h() == in[1] && g.out_w() == in[2]);
  geometry_ = g;
  configured_ = true;
  return Shape{g.in_channels, g.in_h, g.in_w};
}

template <typename T>
std::vector<ParamDecl> ConvTranspose2d<T>::Params() const {
  CHECK(configured_) << Name() << ": Params() before Configure()";
  const ConvGeometry& g = geometry_;
  // PyTorch's fan_in for this weight: dim 1 (OC / G) times the kernel.
  const int64_t fan_in = g.patch();
  std::vector<ParamDecl> params = {
      {"weight",
       {g.out_channels, g.in_channels / g.groups, g.kernel_h, g.kernel_w},
       ParamDecl::Init::kKaimingUniform,
       fan_in}};
  if (options_.bias) {
    params.push_back(
        {"bias", {g.in_channels}, ParamDecl::Init::kFanInUniform, fan_in});
  }
  return params;
}

template <typename T>
void ConvTranspose2d<T>::Bind(std::vector<BasicTensor<T>> values,
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
void ConvTranspose2d<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                                 Mode mode) {
  ConvGeometry& g = geometry_;
  CHECK(in.rank() == 4 && in.dim(0) == g.out_channels &&
        in.dim(2) == g.out_h() && in.dim(3) == g.out_w())
      << Name() << ": input " << ShapeString(in.shape());
  g.batch = in.dim(1);
  EnsureShape(out, {g.in_channels, g.batch, g.in_h, g.in_w});
  ConvBackwardInput<T>(g, in.data(), weight_.data(), out->data(), &workspace_);
  if (options_.bias) {
    const int64_t plane = g.batch * g.in_h * g.in_w;
    T* y = out->data();
    for (int64_t c = 0; c < g.in_channels; ++c) {
      const T b = bias_[c];
      for (int64_t i = 0; i < plane; ++i) y[c * plane + i] += b;
    }
  }
  input_ = mode == Mode::kTrain ? &in : nullptr;
}

template <typename T>
void ConvTranspose2d<T>::Backward(const BasicTensor<T>& grad_out,
                                  BasicTensor<T>* grad_in) {
  CHECK(input_ != nullptr) << Name() << ": Backward without a kTrain Forward";
  const ConvGeometry& g = geometry_;
  CHECK(grad_out.rank() == 4 && grad_out.dim(0) == g.in_channels &&
        grad_out.dim(1) == g.batch && grad_out.dim(2) == g.in_h &&
        grad_out.dim(3) == g.in_w)
      << Name() << ": output gradient " << ShapeString(grad_out.shape());
  if (options_.bias) {
    const int64_t plane = g.batch * g.in_h * g.in_w;
    RowSums<T>(g.in_channels, plane, grad_out.data(), plane, grad_bias_.data());
  }
  // The convolution's forward pass gives the input gradient and leaves in
  // the workspace what its weight gradient reads, so it runs even when
  // nobody needs the input gradient.
  BasicTensor<T>* dx = grad_in != nullptr ? grad_in : &discarded_;
  EnsureShape(dx, {g.out_channels, g.batch, g.out_h(), g.out_w()});
  ConvForward<T>(g, grad_out.data(), weight_.data(), nullptr, dx->data(),
                 &workspace_);
  ConvBackwardWeights<T>(g, input_->data(), grad_weight_.data(), nullptr,
                         &workspace_);
}

template class ConvTranspose2d<float>;
template class ConvTranspose2d<double>;

}  // namespace cohort

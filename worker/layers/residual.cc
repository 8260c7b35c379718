#include "worker/layers/residual.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kernels/elementwise.h"

namespace cohort {

template <typename T>
BasicBlock<T>::BasicBlock(int64_t out_channels, int64_t stride)
    : out_channels_(out_channels),
      stride_(stride),
      conv1_(ConvOptions{out_channels, 3, stride, 1, false}),
      conv2_(ConvOptions{out_channels, 3, 1, 1, false}) {}

template <typename T>
std::string BasicBlock<T>::Name() const {
  return absl::StrCat("basic_block(", in_channels_, "->", out_channels_, ", s",
                      stride_, ")");
}

template <typename T>
absl::StatusOr<Shape> BasicBlock<T>::Configure(const Shape& in) {
  if (out_channels_ < 1 || stride_ < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "basic_block: out_channels and stride must be at least 1, got ",
        out_channels_, " and ", stride_));
  }
  if (in.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "basic_block: expected a per-sample input of shape [C, H, W], got ",
        ShapeString(in)));
  }
  in_channels_ = in[0];
  ASSIGN_OR_RETURN(Shape a1, conv1_.Configure(in));
  RETURN_IF_ERROR(bn1_.Configure(a1).status());
  RETURN_IF_ERROR(relu1_.Configure(a1).status());
  ASSIGN_OR_RETURN(Shape out, conv2_.Configure(a1));
  RETURN_IF_ERROR(bn2_.Configure(out).status());
  if (out != in) {
    down_conv_ = std::make_unique<Conv2d<T>>(
        ConvOptions{out_channels_, 1, stride_, 0, false});
    down_bn_ = std::make_unique<BatchNorm2d<T>>();
    ASSIGN_OR_RETURN(Shape s, down_conv_->Configure(in));
    // 3x3 padded by 1 and 1x1 unpadded give the same size at any stride.
    CHECK(s == out) << Name() << ": shortcut " << ShapeString(s) << " vs "
                    << ShapeString(out);
    RETURN_IF_ERROR(down_bn_->Configure(s).status());
  }
  return out;
}

template <typename T>
std::vector<typename BasicBlock<T>::Part> BasicBlock<T>::Parts() const {
  auto* self = const_cast<BasicBlock<T>*>(this);
  std::vector<Part> parts = {{"conv1", &self->conv1_},
                             {"bn1", &self->bn1_},
                             {"conv2", &self->conv2_},
                             {"bn2", &self->bn2_}};
  if (down_conv_ != nullptr) {
    parts.push_back({"downsample.0", down_conv_.get()});
    parts.push_back({"downsample.1", down_bn_.get()});
  }
  return parts;
}

template <typename T>
std::vector<ParamDecl> BasicBlock<T>::Params() const {
  std::vector<ParamDecl> all;
  for (const Part& p : Parts()) {
    for (ParamDecl d : p.layer->Params()) {
      d.name = absl::StrCat(p.name, ".", d.name);
      all.push_back(std::move(d));
    }
  }
  return all;
}

template <typename T>
void BasicBlock<T>::Bind(std::vector<BasicTensor<T>> values,
                         std::vector<BasicTensor<T>> grads) {
  CHECK_EQ(values.size(), grads.size());
  size_t next = 0;
  for (const Part& p : Parts()) {
    const size_t n = p.layer->Params().size();
    CHECK_LE(next + n, values.size()) << Name() << ": too few views bound";
    std::vector<BasicTensor<T>> v, g;
    for (size_t i = next; i < next + n; ++i) {
      v.push_back(std::move(values[i]));
      g.push_back(std::move(grads[i]));
    }
    p.layer->Bind(std::move(v), std::move(g));
    next += n;
  }
  CHECK_EQ(next, values.size()) << Name() << ": too many views bound";
}

template <typename T>
std::vector<BasicTensor<T>*> BasicBlock<T>::Buffers() {
  std::vector<BasicTensor<T>*> all;
  for (const Part& p : Parts()) {
    for (BasicTensor<T>* b : p.layer->Buffers()) all.push_back(b);
  }
  return all;
}

template <typename T>
void BasicBlock<T>::SeedRandom(uint64_t seed) {
  for (const Part& p : Parts()) p.layer->SeedRandom(seed);
}

template <typename T>
void BasicBlock<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                            Mode mode) {
  conv1_.Forward(in, &a1_, mode);
  bn1_.Forward(a1_, &b1_, mode);
  relu1_.Forward(b1_, &r1_, mode);
  conv2_.Forward(r1_, &a2_, mode);
  // bn2 keeps a pointer to a2, not to its output, so the residual sum can
  // be formed in place in sum_.
  bn2_.Forward(a2_, &sum_, mode);
  if (down_conv_ != nullptr) {
    down_conv_->Forward(in, &s1_, mode);
    down_bn_->Forward(s1_, &s2_, mode);
    AddInPlace(s2_.data(), sum_.data(), sum_.size());
  } else {
    CHECK_EQ(in.size(), sum_.size());
    AddInPlace(in.data(), sum_.data(), sum_.size());
  }
  EnsureShape(out, sum_.shape());
  ReluForward(sum_.data(), out->data(), sum_.size());
}

template <typename T>
void BasicBlock<T>::Backward(const BasicTensor<T>& grad_out,
                             BasicTensor<T>* grad_in) {
  CHECK_EQ(grad_out.size(), sum_.size());
  EnsureShape(&g_sum_, sum_.shape());
  ReluBackward(sum_.data(), grad_out.data(), g_sum_.data(), sum_.size());
  bn2_.Backward(g_sum_, &g_mid_);
  conv2_.Backward(g_mid_, &g_r1_);
  relu1_.Backward(g_r1_, &g_b1_);
  bn1_.Backward(g_b1_, &g_mid_);
  conv1_.Backward(g_mid_, grad_in);
  if (down_conv_ != nullptr) {
    down_bn_->Backward(g_sum_, &g_s1_);
    down_conv_->Backward(g_s1_, grad_in != nullptr ? &g_down_in_ : nullptr);
    if (grad_in != nullptr) {
      AddInPlace(g_down_in_.data(), grad_in->data(), grad_in->size());
    }
  } else if (grad_in != nullptr) {
    AddInPlace(g_sum_.data(), grad_in->data(), grad_in->size());
  }
}

template class BasicBlock<float>;
template class BasicBlock<double>;

}  // namespace cohort

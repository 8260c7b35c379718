#include "worker/layers/residual.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kernels/elementwise.h"
#include "worker/layers/activation.h"

namespace cohort {

template <typename T>
ResidualBlock<T>::ResidualBlock(const char* kind, int64_t out_channels,
                                int64_t stride, int64_t channel_multiple)
    : kind_(kind),
      out_channels_(out_channels),
      stride_(stride),
      channel_multiple_(channel_multiple) {}

template <typename T>
void ResidualBlock<T>::AddMain(const char* name,
                               std::unique_ptr<Layer<T>> layer) {
  main_names_.push_back(name);
  main_.push_back(std::move(layer));
}

template <typename T>
std::unique_ptr<Layer<T>> ResidualBlock<T>::Conv(int64_t out, int64_t kernel,
                                                 int64_t stride,
                                                 int64_t padding) {
  return std::make_unique<Conv2d<T>>(
      ConvOptions{out, kernel, stride, padding, /*bias=*/false});
}

template <typename T>
std::string ResidualBlock<T>::Name() const {
  return absl::StrCat(kind_, "(", in_channels_, "->", out_channels_, ", s",
                      stride_, ")");
}

template <typename T>
absl::StatusOr<Shape> ResidualBlock<T>::Configure(const Shape& in) {
  if (out_channels_ < channel_multiple_ ||
      out_channels_ % channel_multiple_ != 0 || stride_ < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        kind_, ": out_channels must be ",
        channel_multiple_ == 1
            ? std::string("at least 1")
            : absl::StrCat("a positive multiple of ", channel_multiple_),
        " and stride at least 1, got ", out_channels_, " and ", stride_));
  }
  if (in.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        kind_, ": expected a per-sample input of shape [C, H, W], got ",
        ShapeString(in)));
  }
  in_channels_ = in[0];
  Shape out = in;
  for (const std::unique_ptr<Layer<T>>& l : main_) {
    ASSIGN_OR_RETURN(out, l->Configure(out));
  }
  acts_.resize(main_.size() - 1);
  grads_.resize(main_.size() - 1);
  down_conv_.reset();
  down_bn_.reset();
  if (out == in) return out;
  down_conv_ = std::make_unique<Conv2d<T>>(
      ConvOptions{out_channels_, 1, stride_, 0, /*bias=*/false});
  down_bn_ = std::make_unique<BatchNorm2d<T>>();
  ASSIGN_OR_RETURN(Shape s, down_conv_->Configure(in));
  // A 3x3 convolution padded by 1 (whichever 1x1 ones surround it) and a
  // 1x1 unpadded one give the same size at any stride.
  CHECK(s == out) << Name() << ": shortcut " << ShapeString(s) << " vs "
                  << ShapeString(out);
  RETURN_IF_ERROR(down_bn_->Configure(s).status());
  return out;
}

template <typename T>
std::vector<typename ResidualBlock<T>::Part> ResidualBlock<T>::Parts() const {
  std::vector<Part> parts;
  for (size_t i = 0; i < main_.size(); ++i) {
    if (main_names_[i] != nullptr) {
      parts.push_back({main_names_[i], main_[i].get()});
    }
  }
  if (down_conv_ != nullptr) {
    parts.push_back({"downsample.0", down_conv_.get()});
    parts.push_back({"downsample.1", down_bn_.get()});
  }
  return parts;
}

template <typename T>
std::vector<ParamDecl> ResidualBlock<T>::Params() const {
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
void ResidualBlock<T>::Bind(std::vector<BasicTensor<T>> values,
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
std::vector<std::string> ResidualBlock<T>::BufferNames() const {
  std::vector<std::string> all;
  for (const Part& p : Parts()) {
    for (const std::string& b : p.layer->BufferNames()) {
      all.push_back(absl::StrCat(p.name, ".", b));
    }
  }
  return all;
}

template <typename T>
std::vector<BasicTensor<T>*> ResidualBlock<T>::Buffers() {
  std::vector<BasicTensor<T>*> all;
  for (const Part& p : Parts()) {
    for (BasicTensor<T>* b : p.layer->Buffers()) all.push_back(b);
  }
  return all;
}

template <typename T>
void ResidualBlock<T>::SeedRandom(uint64_t seed) {
  for (const Part& p : Parts()) p.layer->SeedRandom(seed);
}

template <typename T>
void ResidualBlock<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                               Mode mode) {
  const BasicTensor<T>* x = &in;
  for (size_t i = 0; i < main_.size(); ++i) {
    BasicTensor<T>* y = i + 1 < main_.size() ? &acts_[i] : &sum_;
    main_[i]->Forward(*x, y, mode);
    x = y;
  }
  if (down_conv_ != nullptr) {
    down_conv_->Forward(in, &s1_, mode);
    down_bn_->Forward(s1_, &s2_, mode);
    AddInPlace(s2_.data(), sum_.data(), sum_.size());
  } else {
    CHECK_EQ(in.size(), sum_.size()) << Name();
    AddInPlace(in.data(), sum_.data(), sum_.size());
  }
  EnsureShape(out, sum_.shape());
  ReluForward(sum_.data(), out->data(), sum_.size());
}

template <typename T>
void ResidualBlock<T>::Backward(const BasicTensor<T>& grad_out,
                                BasicTensor<T>* grad_in) {
  CHECK_EQ(grad_out.size(), sum_.size()) << Name();
  EnsureShape(&g_sum_, sum_.shape());
  ReluBackward(sum_.data(), grad_out.data(), g_sum_.data(), sum_.size());
  const BasicTensor<T>* g = &g_sum_;
  for (size_t i = main_.size() - 1; i > 0; --i) {
    main_[i]->Backward(*g, &grads_[i - 1]);
    g = &grads_[i - 1];
  }
  main_[0]->Backward(*g, grad_in);
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

template <typename T>
BasicBlock<T>::BasicBlock(int64_t out_channels, int64_t stride)
    : ResidualBlock<T>("basic_block", out_channels, stride, 1) {
  this->AddMain("conv1", this->Conv(out_channels, 3, stride, 1));
  this->AddMain("bn1", std::make_unique<BatchNorm2d<T>>());
  this->AddMain(nullptr, std::make_unique<ReLU<T>>());
  this->AddMain("conv2", this->Conv(out_channels, 3, 1, 1));
  this->AddMain("bn2", std::make_unique<BatchNorm2d<T>>());
}

template <typename T>
Bottleneck<T>::Bottleneck(int64_t out_channels, int64_t stride)
    : ResidualBlock<T>("bottleneck", out_channels, stride, 4) {
  const int64_t width = out_channels / 4;
  this->AddMain("conv1", this->Conv(width, 1, 1, 0));
  this->AddMain("bn1", std::make_unique<BatchNorm2d<T>>());
  this->AddMain(nullptr, std::make_unique<ReLU<T>>());
  this->AddMain("conv2", this->Conv(width, 3, stride, 1));
  this->AddMain("bn2", std::make_unique<BatchNorm2d<T>>());
  this->AddMain(nullptr, std::make_unique<ReLU<T>>());
  this->AddMain("conv3", this->Conv(out_channels, 1, 1, 0));
  this->AddMain("bn3", std::make_unique<BatchNorm2d<T>>());
}

template class ResidualBlock<float>;
template class ResidualBlock<double>;
template class BasicBlock<float>;
template class BasicBlock<double>;
template class Bottleneck<float>;
template class Bottleneck<double>;

}  // namespace cohort

#include "worker/layers/residual.h"

#include <type_traits>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kernels/channel_blocked.h"
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
  if (out != in) {
    down_conv_ = std::make_unique<Conv2d<T>>(
        ConvOptions{out_channels_, 1, stride_, 0, /*bias=*/false});
    down_bn_ = std::make_unique<BatchNorm2d<T>>();
    ASSIGN_OR_RETURN(Shape s, down_conv_->Configure(in));
    // A 3x3 convolution padded by 1 (whichever 1x1 ones surround it) and a
    // 1x1 unpadded one give the same size at any stride.
    CHECK(s == out) << Name() << ": shortcut " << ShapeString(s) << " vs "
                    << ShapeString(out);
    RETURN_IF_ERROR(down_bn_->Configure(s).status());
  }
  ChooseLayout(in);
  return out;
}

// Channel-blocked where oneDNN would run every convolution anyway
// (OnednnWins), so that the choice changes the layout, not the algorithm;
// on that layout the 3x3 stride-1 ones then run Winograd where oneDNN runs
// AVX2 code (kernels/conv.h).
template <typename T>
void ResidualBlock<T>::ChooseLayout(const Shape& in) {
  run_.clear();
  for (size_t i = 0; i < main_.size(); ++i) run_.push_back(i);
  block_ = 0;
  tail_bn_ = nullptr;
  int64_t block = 0;
  if constexpr (std::is_same_v<T, float>) block = NativeChannelBlock();
  if (!blocked_allowed_ || block == 0) return;
  std::vector<Layer<T>*> layers;
  for (auto& l : main_) layers.push_back(l.get());
  if (down_conv_ != nullptr) {
    layers.push_back(down_conv_.get());
    layers.push_back(down_bn_.get());
  }
  for (Layer<T>* l : layers) {
    if (auto* conv = dynamic_cast<ConvLayer<T>*>(l)) {
      const ConvGeometry& g = conv->geometry();
      if (g.groups != 1 || g.in_channels % block != 0 ||
          g.out_channels % block != 0 || !OnednnWins(g)) {
        return;
      }
    } else if (dynamic_cast<BatchNormBase<T>*>(l) == nullptr &&
               dynamic_cast<ReLU<T>*>(l) == nullptr) {
      return;
    }
  }
  block_ = block;
  for (Layer<T>* l : layers) {
    if (auto* conv = dynamic_cast<ConvLayer<T>*>(l)) {
      conv->set_channel_block(block);
    } else if (auto* bn = dynamic_cast<BatchNormBase<T>*>(l)) {
      bn->set_channel_block(block);
    }
  }
  FuseRelus();
  PlanScaled();
}

// A batch norm followed by a ReLU inside the main branch applies it itself.
// The block's ReLU comes after the residual sum, outside the branch; on the
// channel-blocked path tail_bn_ applies the sum and it.
template <typename T>
void ResidualBlock<T>::FuseRelus() {
  tail_bn_ = dynamic_cast<BatchNormBase<T>*>(main_.back().get());
  run_.clear();
  for (size_t i = 0; i < main_.size(); ++i) {
    run_.push_back(i);
    auto* bn = dynamic_cast<BatchNormBase<T>*>(main_[i].get());
    if (bn != nullptr && i + 2 < main_.size() &&
        dynamic_cast<ReLU<T>*>(main_[i + 1].get()) != nullptr) {
      bn->set_fused_relu(true);
      ++i;
    }
  }
}

template <typename T>
void ResidualBlock<T>::PlanScaled() {
  scaled_.clear();
  down_scaled_.clear();
  const auto step = [](Layer<T>* conv, Layer<T>* bn, bool relu) {
    ScaledStep s{dynamic_cast<ConvLayer<T>*>(conv),
                 dynamic_cast<BatchNormBase<T>*>(bn), relu};
    return s;
  };
  size_t i = 0;
  while (i + 1 < main_.size()) {
    const bool relu = i + 2 < main_.size() &&
                      dynamic_cast<ReLU<T>*>(main_[i + 2].get()) != nullptr;
    ScaledStep s = step(main_[i].get(), main_[i + 1].get(), relu);
    // The last group's ReLU would come before the sum, not after.
    const bool last = i + (relu ? 3 : 2) == main_.size();
    if (s.conv == nullptr || s.bn == nullptr || s.conv->options().bias ||
        (last && relu)) {
      break;
    }
    scaled_.push_back(std::move(s));
    i += relu ? 3 : 2;
    if (i == main_.size()) {
      if (down_conv_ != nullptr) {
        down_scaled_.push_back(step(down_conv_.get(), down_bn_.get(), false));
      }
      return;
    }
  }
  scaled_.clear();
}

template <typename T>
void ResidualBlock<T>::FreezeParameters() {
  for (const Part& p : Parts()) p.layer->FreezeParameters();
}

template <typename T>
void ResidualBlock<T>::RunScaled(ScaledStep& step, const BasicTensor<T>& in,
                                 const BasicTensor<T>* residual, bool relu,
                                 BasicTensor<T>* out) {
  const int64_t c = step.conv->options().out_channels;
  step.scale.resize(c);
  step.shift.resize(c);
  step.bn->EvalScaleShift(step.scale.data(), step.shift.data());
  step.conv->ForwardScaled(in, step.scale.data(), step.shift.data(), residual,
                           relu, out);
}

// shortcut first, so that the last convolution adds it and applies the
// block's ReLU as it writes the output.
template <typename T>
void ResidualBlock<T>::ForwardScaled(const BasicTensor<T>& in,
                                     BasicTensor<T>* out) {
  const BasicTensor<T>* shortcut = &in;
  if (!down_scaled_.empty()) {
    RunScaled(down_scaled_[0], in, nullptr, false, &s2_);
    shortcut = &s2_;
  }
  const BasicTensor<T>* x = &in;
  for (size_t i = 0; i < scaled_.size(); ++i) {
    const bool last = i + 1 == scaled_.size();
    BasicTensor<T>* y = last ? out : &acts_[i];
    RunScaled(scaled_[i], *x, last ? shortcut : nullptr,
              last || scaled_[i].relu, y);
    x = y;
  }
}

template <typename T>
void ResidualBlock<T>::ToBlocked(const BasicTensor<T>& from,
                                 BasicTensor<T>* to) const {
  EnsureShape(to, from.shape());
  if constexpr (std::is_same_v<T, float>) {
    ToChannelBlocked(from.data(), from.dim(0), from.dim(1),
                     from.dim(2) * from.dim(3), block_, to->data());
  }
}

template <typename T>
void ResidualBlock<T>::FromBlocked(const BasicTensor<T>& from,
                                   BasicTensor<T>* to) const {
  EnsureShape(to, from.shape());
  if constexpr (std::is_same_v<T, float>) {
    FromChannelBlocked(from.data(), from.dim(0), from.dim(1),
                       from.dim(2) * from.dim(3), block_, to->data());
  }
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
void ResidualBlock<T>::TraceSublayers(LayerTrace* trace,
                                      const std::string& prefix) {
  trace_ = trace;
  trace_names_.assign(main_.size() + 2, std::string());
  auto name = [&](size_t index, const std::string& position, Layer<T>& l) {
    const std::string full = absl::StrCat(prefix, ".", position);
    if (trace != nullptr) {
      trace_names_[index] = absl::StrCat(full, " ", l.Name());
    }
    l.TraceSublayers(trace, full);
  };
  for (size_t i = 0; i < main_.size(); ++i) {
    name(i, main_names_[i] != nullptr ? main_names_[i] : absl::StrCat(i),
         *main_[i]);
  }
  if (down_conv_ != nullptr) {
    name(main_.size(), "downsample.0", *down_conv_);
    name(main_.size() + 1, "downsample.1", *down_bn_);
  }
}

template <typename T>
void ResidualBlock<T>::SeedRandom(uint64_t seed) {
  for (const Part& p : Parts()) p.layer->SeedRandom(seed);
}

template <typename T>
void ResidualBlock<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                               Mode mode) {
  const BasicTensor<T>* block_in = &in;
  if (block_ != 0 && !blocked_input_) {
    ToBlocked(in, &in_blocked_);
    block_in = &in_blocked_;
  }
  // Where the block's output is formed: the caller's tensor, unless it
  // wants another layout.
  BasicTensor<T>* block_out =
      block_ != 0 && !blocked_output_ ? &out_blocked_ : out;
  if (block_ != 0 && mode == Mode::kEval && !scaled_.empty()) {
    ForwardScaled(*block_in, block_out);
    relu_in_ = nullptr;  // no Backward after this pass
  } else {
    ForwardChain(*block_in, mode, block_out);
  }
  if (block_out != out) FromBlocked(*block_out, out);
}

template <typename T>
const BasicTensor<T>* ResidualBlock<T>::Shortcut(const BasicTensor<T>& in,
                                                 Mode mode) {
  if (down_conv_ == nullptr) return &in;
  const size_t down = main_.size();
  Traced(down, false, mode, [&] { down_conv_->Forward(in, &s1_, mode); });
  Traced(down + 1, false, mode, [&] { down_bn_->Forward(s1_, &s2_, mode); });
  return &s2_;
}

template <typename T>
void ResidualBlock<T>::ForwardChain(const BasicTensor<T>& in, Mode mode,
                                    BasicTensor<T>* out) {
  const BasicTensor<T>* x = &in;
  const size_t chain = run_.size() - (tail_bn_ != nullptr ? 1 : 0);
  for (size_t k = 0; k < chain; ++k) {
    const size_t i = run_[k];
    BasicTensor<T>* y = k + 1 < run_.size() ? &acts_[i] : &sum_;
    Traced(i, false, mode, [&] { main_[i]->Forward(*x, y, mode); });
    x = y;
  }
  const BasicTensor<T>* shortcut = Shortcut(in, mode);
  if (tail_bn_ != nullptr) {
    Traced(main_.size() - 1, false, mode, [&] {
      tail_bn_->ForwardSum(*x, *shortcut, /*relu=*/true, out, mode);
    });
    relu_in_ = out;
    return;
  }
  CHECK_EQ(shortcut->size(), sum_.size()) << Name();
  AddInPlace(shortcut->data(), sum_.data(), sum_.size());
  EnsureShape(out, sum_.shape());
  ReluForward(sum_.data(), out->data(), sum_.size());
  relu_in_ = &sum_;
}

template <typename T>
void ResidualBlock<T>::Backward(const BasicTensor<T>& grad_out,
                                BasicTensor<T>* grad_in) {
  CHECK(relu_in_ != nullptr) << Name() << ": Backward before Forward";
  CHECK_EQ(grad_out.size(), relu_in_->size()) << Name();
  const BasicTensor<T>* block_grad_out = &grad_out;
  if (block_ != 0 && !blocked_output_) {
    ToBlocked(grad_out, &g_out_blocked_);
    block_grad_out = &g_out_blocked_;
  }
  EnsureShape(&g_sum_, relu_in_->shape());
  ReluBackward(relu_in_->data(), block_grad_out->data(), g_sum_.data(),
               g_sum_.size());
  const BasicTensor<T>* g = &g_sum_;
  for (size_t k = run_.size() - 1; k > 0; --k) {
    const size_t before = run_[k - 1];
    Traced(run_[k], true, Mode::kTrain,
           [&] { main_[run_[k]]->Backward(*g, &grads_[before]); });
    g = &grads_[before];
  }
  BasicTensor<T>* block_grad_in =
      block_ != 0 && !blocked_input_ && grad_in != nullptr ? &g_in_blocked_
                                                           : grad_in;
  Traced(run_[0], true, Mode::kTrain,
         [&] { main_[run_[0]]->Backward(*g, block_grad_in); });
  if (down_conv_ != nullptr) {
    const size_t down = main_.size();
    Traced(down + 1, true, Mode::kTrain,
           [&] { down_bn_->Backward(g_sum_, &g_s1_); });
    Traced(down, true, Mode::kTrain, [&] {
      down_conv_->Backward(g_s1_,
                           block_grad_in != nullptr ? &g_down_in_ : nullptr);
    });
    if (block_grad_in != nullptr) {
      AddInPlace(g_down_in_.data(), block_grad_in->data(),
                 block_grad_in->size());
    }
  } else if (block_grad_in != nullptr) {
    AddInPlace(g_sum_.data(), block_grad_in->data(), block_grad_in->size());
  }
  if (block_grad_in != grad_in) FromBlocked(g_in_blocked_, grad_in);
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

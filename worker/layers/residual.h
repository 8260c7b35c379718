// The ResNet residual blocks (He et al. 2016), as torchvision defines them:
//   out = relu(main(x) + shortcut(x))
//
// BasicBlock (ResNet-18/34): main = conv1 3x3 with the block's stride, bn1,
// ReLU, conv2 3x3 with stride 1, bn2; both convolutions padded by 1.
//
// Bottleneck (ResNet-50/101/152, torchvision's "v1.5": the stride sits on
// the 3x3 convolution), with width = out_channels / 4: main = conv1 1x1 to
// width, bn1, ReLU, conv2 3x3 width -> width (stride, padded by 1), bn2,
// ReLU, conv3 1x1 to out_channels, bn3.
//
// No convolution has a bias. The shortcut is the identity when the shape is
// unchanged, else a 1x1 convolution with the stride (no bias) and a batch
// norm. Per-sample {C, H, W} -> {out_channels, H', W'}.
//
// Layout: in float, where oneDNN runs the convolutions and every channel
// count fills its channel blocks (kernels/channel_blocked.h), the block
// converts its input and output gradient into oneDNN's nChw{B}c layout
// once, keeps every activation and gradient inside in that layout, and
// converts its output and input gradient back: two conversions each way
// instead of a reorder into and out of every convolution pass. Evaluation
// there folds each batch norm into the convolution before it, with the
// ReLU and the residual sum, as one oneDNN pass per convolution.
//
// Composites: a block owns its sub-layers and the intermediate activations
// and gradients between them (reused from step to step). Params(), Bind()
// and Buffers() concatenate the sub-layers' in torchvision's state_dict
// order (conv1, bn1, conv2, bn2[, conv3, bn3], downsample.0, downsample.1),
// parameter names prefixed likewise ("conv1.weight", "bn1.bias", ...).
// Thread safety: none; one replica's thread drives a layer.
#ifndef COHORT_WORKER_LAYERS_RESIDUAL_H_
#define COHORT_WORKER_LAYERS_RESIDUAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/layers/batchnorm.h"
#include "worker/layers/conv.h"
#include "worker/layers/layer.h"

namespace cohort {

// relu(main(x) + shortcut(x)) for a main branch given as a chain of layers;
// the subclasses below only build the chain.
template <typename T>
class ResidualBlock : public Layer<T> {
 public:
  // "<kind>(in->out, s<stride>)".
  std::string Name() const override;
  // Checks out_channels, stride and that `in` is {C, H, W}, then configures
  // the main branch and, when its output shape differs from `in`, the
  // downsample.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<ParamDecl> Params() const override;
  void Bind(std::vector<BasicTensor<T>> values,
            std::vector<BasicTensor<T>> grads) override;
  std::vector<BasicTensor<T>*> Buffers() override;
  std::vector<std::string> BufferNames() const override;
  void SeedRandom(uint64_t seed) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

  // Whether Configure may choose the channel-blocked layout (default yes);
  // tests and benchmarks compare the two. Call before Configure.
  void set_channel_blocked(bool allowed) { blocked_allowed_ = allowed; }
  // The channel block in use after Configure, 0 for batch-inner.
  int64_t channel_block() const override { return block_; }
  // The convolutions of the evaluation pass keep their converted weights.
  void FreezeParameters() override;
  // Names the main branch's layers "<prefix>.<name>" (their parameters'
  // prefix, "conv1"; the index for a layer without parameters) and the
  // shortcut's "<prefix>.downsample.0" and ".1".
  void TraceSublayers(LayerTrace* trace, const std::string& prefix) override;
  void set_blocked_neighbours(bool input, bool output) override {
    blocked_input_ = input;
    blocked_output_ = output;
  }

 protected:
  // out_channels must be a positive multiple of `channel_multiple` and
  // stride at least 1 (Configure reports other values).
  ResidualBlock(const char* kind, int64_t out_channels, int64_t stride,
                int64_t channel_multiple);
  // Appends `layer` to the main branch; `name` ("conv1") prefixes its
  // parameters, null for layers without any (ReLU). The block forms the
  // residual sum in place in the last layer's output, so that layer must
  // not read its output in Backward (a batch norm reads its input).
  void AddMain(const char* name, std::unique_ptr<Layer<T>> layer);
  // A 2-D convolution without bias, for AddMain.
  static std::unique_ptr<Layer<T>> Conv(int64_t out, int64_t kernel,
                                        int64_t stride, int64_t padding);

 private:
  struct Part {
    const char* name;  // null: no parameters
    Layer<T>* layer;
  };
  // The sub-layers with parameters, in parameter order: the main branch's,
  // then the downsample's.
  std::vector<Part> Parts() const;
  // After the sub-layers are configured: picks block_ and tells the
  // convolutions and batch norms.
  void ChooseLayout(const Shape& in);
  // Fills run_, letting each batch norm apply the ReLU after it, and sets
  // tail_bn_ (the last batch norm applies the sum and the block's ReLU).
  void FuseRelus();
  // One convolution of the evaluation pass with its batch norm (and ReLU)
  // folded in.
  struct ScaledStep {
    ConvLayer<T>* conv;
    BatchNormBase<T>* bn;
    bool relu;
    std::vector<T> scale, shift;
  };
  // Fills scaled_ when the main branch is (convolution, batch norm[, ReLU])
  // groups; leaves it empty otherwise.
  void PlanScaled();
  // The main branch, the shortcut, their sum and the ReLU, layer by layer;
  // with tail_bn_, the last three in one pass.
  void ForwardChain(const BasicTensor<T>& in, Mode mode, BasicTensor<T>* out);
  // The shortcut's output for block input `in`: `in` itself, or s2_.
  const BasicTensor<T>* Shortcut(const BasicTensor<T>& in, Mode mode);
  // Evaluation on the channel-blocked path with scaled_.
  void ForwardScaled(const BasicTensor<T>& in, BasicTensor<T>* out);
  void RunScaled(ScaledStep& step, const BasicTensor<T>& in,
                 const BasicTensor<T>* residual, bool relu,
                 BasicTensor<T>* out);
  // Runs `call`, sub-layer `index`'s Forward (in `mode`) or Backward,
  // reporting it to trace_ in training mode. Indices: main_'s, then the
  // downsample's convolution and batch norm.
  template <typename Call>
  void Traced(size_t index, bool backward, Mode mode, Call&& call) {
    if (trace_ == nullptr || mode != Mode::kTrain) {
      call();
      return;
    }
    TraceLayerCall(trace_, trace_names_[index], backward, call);
  }
  // Converts between the caller's batch-inner tensors and block_'s layout.
  void ToBlocked(const BasicTensor<T>& from, BasicTensor<T>* to) const;
  void FromBlocked(const BasicTensor<T>& from, BasicTensor<T>* to) const;

  const char* const kind_;
  const int64_t out_channels_;
  const int64_t stride_;
  const int64_t channel_multiple_;
  int64_t in_channels_ = 0;
  std::vector<const char*> main_names_;
  std::vector<std::unique_ptr<Layer<T>>> main_;
  // The main-branch layers that run, in order: all of them, less the ReLUs
  // that the batch norm before them applies (channel-blocked path).
  std::vector<size_t> run_;
  // Null when the shortcut is the identity.
  std::unique_ptr<Conv2d<T>> down_conv_;
  std::unique_ptr<BatchNorm2d<T>> down_bn_;
  LayerTrace* trace_ = nullptr;  // TraceSublayers
  std::vector<std::string> trace_names_;

  // The main branch's last layer when it is a batch norm on the
  // channel-blocked path: it adds the shortcut and applies the block's ReLU
  // as it writes the block's output (BatchNormBase::ForwardSum), and sum_
  // stays unused. Null otherwise.
  BatchNormBase<T>* tail_bn_ = nullptr;
  // acts_[i]: the output of main-branch layer i, for all but the last,
  // which writes sum_: the main branch's output, then the residual sum (in
  // place; the batch norm keeps a pointer to its input, not to this).
  // Shortcut: s1_ -> s2_.
  std::vector<BasicTensor<T>> acts_;
  BasicTensor<T> sum_, s1_, s2_;
  // Where the last Forward left the residual sum or the block's output,
  // whose positive elements pass the gradient back (the same elements).
  const BasicTensor<T>* relu_in_ = nullptr;
  // grads_[i]: dLoss/dacts_[i], each keeping its shape from step to step;
  // g_sum_: dLoss/dsum_.
  std::vector<BasicTensor<T>> grads_;
  BasicTensor<T> g_sum_, g_s1_, g_down_in_;
  // Channel-blocked path: the converted input, output and output gradient,
  // and the input gradient before its conversion.
  bool blocked_allowed_ = true;
  int64_t block_ = 0;
  // The neighbours' side of the input and output is blocked too.
  bool blocked_input_ = false, blocked_output_ = false;
  BasicTensor<T> in_blocked_, out_blocked_, g_out_blocked_, g_in_blocked_;
  // The main branch's steps (scaled_) and the shortcut's (down_scaled_,
  // when it has a convolution) for evaluation.
  std::vector<ScaledStep> scaled_;
  std::vector<ScaledStep> down_scaled_;
};

template <typename T>
class BasicBlock final : public ResidualBlock<T> {
 public:
  BasicBlock(int64_t out_channels, int64_t stride = 1);
};

template <typename T>
class Bottleneck final : public ResidualBlock<T> {
 public:
  // out_channels must be a multiple of 4.
  Bottleneck(int64_t out_channels, int64_t stride = 1);
};

extern template class ResidualBlock<float>;
extern template class ResidualBlock<double>;
extern template class BasicBlock<float>;
extern template class BasicBlock<double>;
extern template class Bottleneck<float>;
extern template class Bottleneck<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_RESIDUAL_H_

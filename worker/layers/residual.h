// The ResNet basic block (He et al. 2016; torchvision's BasicBlock):
//   out = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))
// conv1 is 3x3 with the block's stride, conv2 3x3 with stride 1, both padded
// by 1 and without bias. The shortcut is the identity when the shape is
// unchanged, else a 1x1 convolution with the stride (no bias) and a batch
// norm. Per-sample {C, H, W} -> {out_channels, H', W'}.
//
// A composite: the block owns its sub-layers and the intermediate
// activations and gradients between them (reused from step to step).
// Params(), Bind() and Buffers() concatenate the sub-layers' in the fixed
// order conv1, bn1, conv2, bn2, downsample.0, downsample.1 (torchvision's
// state_dict order, parameter names prefixed likewise). Thread safety: none;
// one replica's thread drives a layer.
#ifndef COHORT_WORKER_LAYERS_RESIDUAL_H_
#define COHORT_WORKER_LAYERS_RESIDUAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "worker/layers/activation.h"
#include "worker/layers/batchnorm.h"
#include "worker/layers/conv.h"
#include "worker/layers/layer.h"

namespace cohort {

template <typename T>
class BasicBlock : public Layer<T> {
 public:
  // Values below 1 are reported by Configure.
  BasicBlock(int64_t out_channels, int64_t stride = 1);

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<ParamDecl> Params() const override;
  void Bind(std::vector<BasicTensor<T>> values,
            std::vector<BasicTensor<T>> grads) override;
  std::vector<BasicTensor<T>*> Buffers() override;
  void SeedRandom(uint64_t seed) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 private:
  struct Part {
    const char* name;
    Layer<T>* layer;
  };
  // The sub-layers with parameters, in parameter order.
  std::vector<Part> Parts() const;

  int64_t in_channels_ = 0;
  int64_t out_channels_;
  int64_t stride_;
  Conv2d<T> conv1_;
  BatchNorm2d<T> bn1_;
  ReLU<T> relu1_;
  Conv2d<T> conv2_;
  BatchNorm2d<T> bn2_;
  // Null when the shortcut is the identity.
  std::unique_ptr<Conv2d<T>> down_conv_;
  std::unique_ptr<BatchNorm2d<T>> down_bn_;

  // Activations: conv1 -> a1 -> bn1 -> b1 -> relu -> r1 -> conv2 -> a2 ->
  // bn2 -> sum (+ shortcut, in place) -> relu -> out; shortcut s1 -> s2.
  BasicTensor<T> a1_, b1_, r1_, a2_, sum_, s1_, s2_;
  // Gradients; g_mid_ holds dL/da2 and later dL/da1 (same shape).
  BasicTensor<T> g_sum_, g_mid_, g_r1_, g_b1_, g_s1_, g_down_in_;
};

extern template class BasicBlock<float>;
extern template class BasicBlock<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_RESIDUAL_H_

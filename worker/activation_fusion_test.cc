// Activation fusion in chains (worker/layers/layer_fusion.h): which layers a
// chain skips, and that a model whose batch norms apply the ReLU or ReLU6
// after them trains and evaluates with the bits of the same model whose
// activation layers run on their own (wrapped so that they refuse fusion),
// in a model's chain, in a branch's path, and on dense activations.
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "worker/layers/activation.h"
#include "worker/layers/batchnorm.h"
#include "worker/layers/branch.h"
#include "worker/layers/conv.h"
#include "worker/layers/elementwise_activation.h"
#include "worker/layers/layer_fusion.h"
#include "worker/layers/linear.h"
#include "worker/model.h"

namespace cohort {
namespace {

using Layers = std::vector<std::unique_ptr<Layer<float>>>;

// An activation layer that the layer before it cannot absorb: everything
// but fused_activation_kind() goes to the wrapped layer.
class Unfusable final : public Layer<float> {
 public:
  explicit Unfusable(std::unique_ptr<Layer<float>> l) : l_(std::move(l)) {}
  std::string Name() const override { return l_->Name(); }
  absl::StatusOr<Shape> Configure(const Shape& in) override {
    return l_->Configure(in);
  }
  void Forward(const Tensor& in, Tensor* out, Mode mode) override {
    l_->Forward(in, out, mode);
  }
  void Backward(const Tensor& grad_out, Tensor* grad_in) override {
    l_->Backward(grad_out, grad_in);
  }

 private:
  std::unique_ptr<Layer<float>> l_;
};

std::unique_ptr<Layer<float>> Relu6() {
  return std::make_unique<ElementwiseActivation<float>>(ActivationKind::kRelu6);
}
std::unique_ptr<Layer<float>> Relu() { return std::make_unique<ReLU<float>>(); }
std::unique_ptr<Layer<float>> Bn2d() {
  return std::make_unique<BatchNorm2d<float>>();
}
std::unique_ptr<Layer<float>> Conv(int64_t oc, int64_t k, int64_t groups) {
  ConvOptions o;
  o.out_channels = oc;
  o.kernel = k;
  o.padding = k / 2;
  o.groups = groups;
  return std::make_unique<Conv2d<float>>(o);
}

// The activation `a`, or the same wrapped so that it stays a layer.
std::unique_ptr<Layer<float>> Act(std::unique_ptr<Layer<float>> a,
                                  bool fusable) {
  if (fusable) return a;
  return std::make_unique<Unfusable>(std::move(a));
}

// conv, BN, ReLU6, a residual sum branch whose path ends in its activation
// and whose sum takes a ReLU6, BN, ReLU as the model's last layer.
Layers Spatial(bool fusable) {
  Layers l;
  l.push_back(Conv(8, 3, 1));
  l.push_back(Bn2d());
  l.push_back(Act(Relu6(), fusable));
  std::vector<Branch<float>::Path> paths(2);
  paths[0].push_back(Conv(8, 3, 8));
  paths[0].push_back(Bn2d());
  paths[0].push_back(Act(Relu(), fusable));
  l.push_back(
      std::make_unique<Branch<float>>(std::move(paths), BranchCombine::kSum));
  l.push_back(Act(Relu6(), fusable));
  l.push_back(Bn2d());
  l.push_back(Act(Relu(), fusable));
  return l;
}

Layers Dense(bool fusable) {
  Layers l;
  l.push_back(std::make_unique<Linear<float>>(12));
  l.push_back(std::make_unique<BatchNorm1d<float>>());
  l.push_back(Act(Relu6(), fusable));
  l.push_back(std::make_unique<Linear<float>>(5));
  return l;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

Tensor Normal(const Shape& shape, Rng& rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  Tensor t(shape);
  for (int64_t i = 0; i < t.size(); ++i) t[i] = normal(rng);
  return t;
}

// Two training steps (forward, backward, parameter gradients, running
// statistics) and an evaluation, both models from the same seed.
void ExpectSameBits(Layers (*build)(bool), const Shape& sample,
                    const Shape& batch) {
  auto fused = Model<float>::Create(build(true), sample);
  auto plain = Model<float>::Create(build(false), sample);
  ASSERT_TRUE(fused.ok() && plain.ok());
  (*fused)->InitializeParameters(3);
  (*plain)->InitializeParameters(3);
  Rng rng(11);
  for (int step = 0; step < 2; ++step) {
    const Tensor x = Normal(batch, rng, 3.0f);
    const Tensor& y = (*fused)->Forward(x, Mode::kTrain);
    ASSERT_TRUE(SameBits(y, (*plain)->Forward(x, Mode::kTrain))) << step;
    const Tensor dy = Normal(y.shape(), rng, 1.0f);
    (*fused)->Backward(dy);
    (*plain)->Backward(dy);
    EXPECT_TRUE(SameBits((*fused)->grads(), (*plain)->grads())) << step;
  }
  const auto buffers = (*fused)->Buffers(), want = (*plain)->Buffers();
  ASSERT_EQ(buffers.size(), want.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    EXPECT_TRUE(SameBits(*buffers[i], *want[i])) << "buffer " << i;
  }
  const Tensor x = Normal(batch, rng, 3.0f);
  EXPECT_TRUE(SameBits((*fused)->Forward(x, Mode::kEval),
                       (*plain)->Forward(x, Mode::kEval)));
}

TEST(ActivationFusion, BatchNormsTakeTheActivationAfterThem) {
  Layers chain;
  chain.push_back(Bn2d());
  chain.push_back(Relu6());
  chain.push_back(Relu());  // its predecessor runs inside the batch norm
  chain.push_back(Conv(4, 1, 1));
  chain.push_back(Relu());  // a convolution applies no activation
  chain.push_back(Bn2d());
  chain.push_back(Relu());
  Shape s = {4, 5, 5};
  for (auto& l : chain) s = *l->Configure(s);
  EXPECT_EQ(FuseActivations(chain),
            std::vector<bool>({false, true, false, false, false, false, true}));
}

// Summing branches take the activation after them; the others do not.
TEST(ActivationFusion, SumBranchesTakeTheActivationAfterThem) {
  const auto branch = [](BranchCombine combine, int paths) {
    std::vector<Branch<float>::Path> p(paths);
    for (auto& path : p) path.push_back(Conv(4, 1, 1));
    return std::make_unique<Branch<float>>(std::move(p), combine);
  };
  Layers chain;
  chain.push_back(branch(BranchCombine::kSum, 2));
  chain.push_back(Relu());
  chain.push_back(branch(BranchCombine::kConcat, 1));
  chain.push_back(Relu());
  chain.push_back(branch(BranchCombine::kSum, 1));  // nothing to add up
  chain.push_back(Relu6());
  Shape s = {4, 5, 5};
  for (auto& l : chain) s = *l->Configure(s);
  EXPECT_EQ(FuseActivations(chain),
            std::vector<bool>({false, true, false, false, false, false}));
}

TEST(ActivationFusion, SpatialModelTrainsWithTheBitsOfSeparateLayers) {
  ExpectSameBits(Spatial, {3, 9, 9}, {3, 4, 9, 9});
}

TEST(ActivationFusion, DenseModelTrainsWithTheBitsOfSeparateLayers) {
  ExpectSameBits(Dense, {7}, {6, 7});
}

}  // namespace
}  // namespace cohort

#include "worker/layers/branch.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "worker/layers/activation.h"
#include "worker/layers/batchnorm.h"
#include "worker/layers/conv.h"
#include "worker/layers/elementwise_activation.h"
#include "worker/layers/grad_check.h"
#include "worker/layers/linear.h"
#include "worker/layers/param_store.h"
#include "worker/layers/pool.h"

namespace cohort {
namespace {

template <typename T>
using Path = typename Branch<T>::Path;

template <typename T>
std::unique_ptr<Layer<T>> Conv(int64_t oc, int64_t k, int64_t p,
                               int64_t groups = 1, int64_t stride = 1) {
  ConvOptions o;
  o.out_channels = oc;
  o.kernel = k;
  o.padding = p;
  o.stride = stride;
  o.groups = groups;
  return std::make_unique<Conv2d<T>>(o);
}

template <typename... L>
Path<double> Layers(L... l) {
  Path<double> p;
  (p.push_back(std::move(l)), ...);
  return p;
}

// Inception-style: a 1x1, a 3x3 and an identity path, concatenated.
std::unique_ptr<Branch<double>> Inception() {
  std::vector<Path<double>> paths;
  paths.push_back(Layers(Conv<double>(2, 1, 0)));
  paths.push_back(
      Layers(Conv<double>(3, 3, 1), std::make_unique<ReLU<double>>()));
  paths.push_back(Path<double>());
  return std::make_unique<Branch<double>>(std::move(paths),
                                          BranchCombine::kConcat);
}

// MobileNetV2's inverted residual: expand, depthwise, project, + identity.
std::unique_ptr<Branch<double>> InvertedResidual(int64_t c) {
  std::vector<Path<double>> paths;
  paths.push_back(
      Layers(Conv<double>(2 * c, 1, 0), std::make_unique<BatchNorm2d<double>>(),
             std::make_unique<ReLU<double>>(), Conv<double>(2 * c, 3, 1, 2 * c),
             std::make_unique<BatchNorm2d<double>>(),
             std::make_unique<ReLU<double>>(), Conv<double>(c, 1, 0)));
  paths.push_back(Path<double>());
  return std::make_unique<Branch<double>>(std::move(paths),
                                          BranchCombine::kSum);
}

// Squeeze-and-excitation's gate over c channels of size hw x hw: pool to
// {c, 1, 1}, squeeze to c / 2, excite back to c, sigmoid.
Path<double> SeGate(int64_t c, int64_t hw) {
  PoolOptions pool;
  pool.kernel = hw;
  return Layers(std::make_unique<AvgPool2d<double>>(pool),
                Conv<double>(c / 2, 1, 0), std::make_unique<ReLU<double>>(),
                Conv<double>(c, 1, 0),
                std::make_unique<ElementwiseActivation<double>>(
                    ActivationKind::kSigmoid));
}

void ExpectGradientsOk(Layer<double>& layer, const Shape& in,
                       const Shape& batch) {
  const absl::Status s = CheckLayerGradients(layer, in, batch);
  EXPECT_TRUE(s.ok()) << layer.Name() << ": " << s;
}

TEST(Branch, ConcatShapesAndParameterNames) {
  std::unique_ptr<Branch<double>> b = Inception();
  absl::StatusOr<Shape> out = b->Configure({4, 5, 5});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, Shape({2 + 3 + 4, 5, 5}));
  std::vector<std::string> names;
  for (const ParamDecl& d : b->Params()) names.push_back(d.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"paths.0.0.weight", "paths.0.0.bias",
                                      "paths.1.0.weight", "paths.1.0.bias"}));
  EXPECT_EQ(b->Name(), "branch(concat, 3 paths)");
}

TEST(Branch, ConcatGradients) {
  std::unique_ptr<Branch<double>> b = Inception();
  ExpectGradientsOk(*b, {4, 5, 5}, {4, 2, 5, 5});
}

TEST(Branch, SumInvertedResidualGradientsAndBuffers) {
  std::unique_ptr<Branch<double>> b = InvertedResidual(3);
  ExpectGradientsOk(*b, {3, 6, 6}, {3, 3, 6, 6});
  EXPECT_EQ(b->BufferNames(),
            (std::vector<std::string>{
                "paths.0.1.running_mean", "paths.0.1.running_var",
                "paths.0.4.running_mean", "paths.0.4.running_var"}));
}

TEST(Branch, NestedBranchesBothCombines) {
  // sum(concat(1x1, inverted residual), 3x3 conv).
  std::vector<Path<double>> inner;
  inner.push_back(Layers(Conv<double>(1, 1, 0)));
  inner.push_back(Layers(InvertedResidual(2)));
  // concat gives 1 + 2 = 3 channels from 2; the other path a 3x3 conv.
  std::vector<Path<double>> outer;
  outer.push_back(Layers(std::make_unique<Branch<double>>(
      std::move(inner), BranchCombine::kConcat)));
  outer.push_back(Layers(Conv<double>(3, 3, 1)));
  Branch<double> b(std::move(outer), BranchCombine::kSum);
  ExpectGradientsOk(b, {2, 5, 4}, {2, 3, 5, 4});
  EXPECT_EQ(b.Params()[0].name, "paths.0.0.paths.0.0.weight");
}

TEST(Branch, DenseConcatAndSum) {
  std::vector<Path<double>> paths;
  paths.push_back(Layers(std::make_unique<Linear<double>>(3)));
  paths.push_back(Layers(std::make_unique<Linear<double>>(2),
                         std::make_unique<ReLU<double>>()));
  paths.push_back(Path<double>());
  Branch<double> concat(std::move(paths), BranchCombine::kConcat);
  ExpectGradientsOk(concat, {4}, {3, 4});
  EXPECT_EQ(*concat.Configure({4}), Shape({9}));

  std::vector<Path<double>> sum_paths;
  sum_paths.push_back(Layers(std::make_unique<Linear<double>>(4)));
  sum_paths.push_back(Path<double>());
  sum_paths.push_back(Layers(std::make_unique<Linear<double>>(4)));
  Branch<double> sum(std::move(sum_paths), BranchCombine::kSum);
  ExpectGradientsOk(sum, {4}, {3, 4});
}

TEST(Branch, MulSqueezeExcitationShapesAndGradients) {
  std::vector<Path<double>> paths;
  paths.push_back(Path<double>());
  paths.push_back(SeGate(4, 5));
  Branch<double> se(std::move(paths), BranchCombine::kMul);
  ExpectGradientsOk(se, {4, 5, 5}, {4, 3, 5, 5});
  EXPECT_EQ(*se.Configure({4, 5, 5}), Shape({4, 5, 5}));
  EXPECT_EQ(se.Name(), "branch(mul, 2 paths)");
  EXPECT_EQ(se.Params()[0].name, "paths.1.1.weight");
}

TEST(Branch, MulGateFirstAndThreePaths) {
  // gate * conv(x) * x * gate': gates before and after the full paths.
  std::vector<Path<double>> paths;
  paths.push_back(SeGate(2, 4));
  paths.push_back(Layers(Conv<double>(2, 3, 1)));
  paths.push_back(Path<double>());
  paths.push_back(SeGate(2, 4));
  Branch<double> b(std::move(paths), BranchCombine::kMul);
  ExpectGradientsOk(b, {2, 4, 4}, {2, 3, 4, 4});
  EXPECT_EQ(*b.Configure({2, 4, 4}), Shape({2, 4, 4}));
}

TEST(Branch, MulOfEqualShapes) {
  std::vector<Path<double>> paths;
  paths.push_back(Layers(Conv<double>(3, 3, 1)));
  paths.push_back(
      Layers(Conv<double>(3, 1, 0), std::make_unique<ReLU<double>>()));
  Branch<double> spatial(std::move(paths), BranchCombine::kMul);
  ExpectGradientsOk(spatial, {2, 4, 5}, {2, 2, 4, 5});

  std::vector<Path<double>> dense_paths;
  dense_paths.push_back(Layers(std::make_unique<Linear<double>>(4)));
  dense_paths.push_back(Path<double>());
  dense_paths.push_back(Layers(std::make_unique<Linear<double>>(4)));
  Branch<double> dense(std::move(dense_paths), BranchCombine::kMul);
  ExpectGradientsOk(dense, {4}, {3, 4});
}

TEST(Branch, MulRejectsAGateOfOtherChannels) {
  std::vector<Path<float>> paths;
  paths.push_back(Path<float>());
  Path<float> gate;
  PoolOptions pool;
  pool.kernel = 6;
  gate.push_back(std::make_unique<AvgPool2d<float>>(pool));
  gate.push_back(Conv<float>(3, 1, 0));
  paths.push_back(std::move(gate));
  Branch<float> mul(std::move(paths), BranchCombine::kMul);
  EXPECT_EQ(mul.Configure({2, 6, 6}).status().message(),
            "branch(mul, 2 paths): path 1 gives [3, 1, 1] but path 0 gives "
            "[2, 6, 6]; multiplied paths must give the same shape, or "
            "[C, 1, 1] to scale [C, H, W]");
}

TEST(Branch, RejectsPathsThatDoNotCombine) {
  std::vector<Path<float>> paths;
  paths.push_back(Path<float>());
  Path<float> p;
  p.push_back(Conv<float>(4, 3, 0));
  paths.push_back(std::move(p));
  Branch<float> sum(std::move(paths), BranchCombine::kSum);
  const absl::Status s = sum.Configure({2, 6, 6}).status();
  EXPECT_EQ(s.message(),
            "branch(sum, 2 paths): path 1 gives [4, 4, 4] but path 0 gives "
            "[2, 6, 6]; summed paths must give the same shape");
}

}  // namespace
}  // namespace cohort

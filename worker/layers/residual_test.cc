#include "worker/layers/residual.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "worker/layers/grad_check.h"
#include "worker/layers/param_store.h"

namespace cohort {
namespace {

TEST(BasicBlock, IdentityShortcutKeepsShapeAndHasNoDownsample) {
  BasicBlock<float> block(4);
  absl::StatusOr<Shape> out = block.Configure({4, 8, 8});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, Shape({4, 8, 8}));
  std::vector<std::string> names;
  for (const ParamDecl& d : block.Params()) names.push_back(d.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv1.weight", "bn1.weight",
                                             "bn1.bias", "conv2.weight",
                                             "bn2.weight", "bn2.bias"}));
  EXPECT_EQ(block.Buffers().size(), 4u);
}

TEST(BasicBlock, StrideOrWidthChangeAddsDownsample) {
  BasicBlock<float> block(8, 2);
  absl::StatusOr<Shape> out = block.Configure({4, 7, 7});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, Shape({8, 4, 4}));
  const std::vector<ParamDecl> params = block.Params();
  ASSERT_EQ(params.size(), 9u);
  EXPECT_EQ(params[6].name, "downsample.0.weight");
  EXPECT_EQ(params[6].shape, Shape({8, 4, 1, 1}));
  EXPECT_EQ(params[8].name, "downsample.1.bias");
  EXPECT_EQ(block.Buffers().size(), 6u);
  EXPECT_EQ(block.Name(), "basic_block(4->8, s2)");
}

TEST(BasicBlock, RejectsBadArguments) {
  BasicBlock<float> zero(0);
  absl::Status s = zero.Configure({4, 8, 8}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("out_channels and stride must be at least 1"),
            std::string::npos)
      << s;
  BasicBlock<float> flat(4);
  s = flat.Configure({4, 8}).status();
  EXPECT_NE(s.message().find("[C, H, W], got [4, 8]"), std::string::npos) << s;
}

// The block against the same layers chained by hand, parameters copied
// entry by entry: checks the wiring (strides, padding, shortcut, final ReLU).
void ExpectMatchesHandChain(int64_t in_c, int64_t out_c, int64_t stride) {
  const Shape in_shape = {in_c, 6, 6};
  BasicBlock<double> block(out_c, stride);
  ASSERT_TRUE(block.Configure(in_shape).ok());
  ParamStore<double> block_store;
  Layer<double>* block_layers[] = {&block};
  block_store.Build(block_layers);
  Rng rng(3);
  block_store.Initialize(rng);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int64_t i = 0; i < block_store.values().size(); ++i) {
    block_store.values()[i] += 0.1 * normal(rng);
  }

  Conv2d<double> conv1({out_c, 3, stride, 1, false});
  Conv2d<double> conv2({out_c, 3, 1, 1, false});
  Conv2d<double> down({out_c, 1, stride, 0, false});
  BatchNorm2d<double> bn1, bn2, down_bn;
  ReLU<double> relu;
  const bool has_down = in_c != out_c || stride != 1;
  absl::StatusOr<Shape> mid = conv1.Configure(in_shape);
  ASSERT_TRUE(mid.ok());
  ASSERT_TRUE(bn1.Configure(*mid).ok());
  ASSERT_TRUE(conv2.Configure(*mid).ok());
  ASSERT_TRUE(bn2.Configure(*mid).ok());
  ASSERT_TRUE(down.Configure(in_shape).ok());
  ASSERT_TRUE(down_bn.Configure(*mid).ok());
  std::vector<Layer<double>*> chain = {&conv1, &bn1, &conv2, &bn2};
  if (has_down) chain.insert(chain.end(), {&down, &down_bn});
  ParamStore<double> chain_store;
  chain_store.Build(chain);
  ASSERT_EQ(chain_store.entries().size(), block_store.entries().size());
  for (size_t e = 0; e < chain_store.entries().size(); ++e) {
    const auto& from = block_store.entries()[e];
    const auto& to = chain_store.entries()[e];
    ASSERT_EQ(from.shape, to.shape) << e;
    for (int64_t i = 0; i < NumElements(from.shape); ++i) {
      chain_store.values()[to.offset + i] =
          block_store.values()[from.offset + i];
    }
  }

  TensorD x({in_c, 3, 6, 6});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = normal(rng);
  TensorD out;
  block.Forward(x, &out, Mode::kTrain);

  TensorD a, b, r, a2, sum, s1, s2, expected;
  conv1.Forward(x, &a, Mode::kTrain);
  bn1.Forward(a, &b, Mode::kTrain);
  relu.Forward(b, &r, Mode::kTrain);
  conv2.Forward(r, &a2, Mode::kTrain);
  bn2.Forward(a2, &sum, Mode::kTrain);
  const TensorD* shortcut = &x;
  if (has_down) {
    down.Forward(x, &s1, Mode::kTrain);
    down_bn.Forward(s1, &s2, Mode::kTrain);
    shortcut = &s2;
  }
  ASSERT_EQ(out.shape(), sum.shape());
  for (int64_t i = 0; i < sum.size(); ++i) {
    const double want = std::max(sum[i] + (*shortcut)[i], 0.0);
    ASSERT_NEAR(out[i], want, 1e-12) << i;
  }
}

TEST(BasicBlock, IdentityBlockMatchesHandChain) {
  ExpectMatchesHandChain(4, 4, 1);
}

TEST(BasicBlock, DownsampleBlockMatchesHandChain) {
  ExpectMatchesHandChain(3, 5, 2);
}

TEST(BasicBlock, IdentityGradientsMatchFiniteDifferences) {
  BasicBlock<double> block(3);
  const absl::Status s = CheckLayerGradients(block, {3, 5, 5}, {3, 2, 5, 5});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(BasicBlock, DownsampleGradientsMatchFiniteDifferences) {
  BasicBlock<double> block(4, 2);
  const absl::Status s = CheckLayerGradients(block, {2, 6, 6}, {2, 3, 6, 6});
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace cohort

#include "worker/layers/residual.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/channel_blocked.h"
#include "worker/layers/activation.h"
#include "worker/layers/grad_check.h"
#include "worker/layers/param_store.h"
#include "worker/layers/tensor_expect.h"

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
  // torchvision's state_dict names, in Buffers()' order.
  EXPECT_EQ(block.BufferNames(),
            (std::vector<std::string>{"bn1.running_mean", "bn1.running_var",
                                      "bn2.running_mean", "bn2.running_var",
                                      "downsample.1.running_mean",
                                      "downsample.1.running_var"}));
  EXPECT_EQ(block.Name(), "basic_block(4->8, s2)");
}

TEST(BasicBlock, RejectsBadArguments) {
  BasicBlock<float> zero(0);
  absl::Status s = zero.Configure({4, 8, 8}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "basic_block: out_channels must be at least 1 and stride at "
            "least 1, got 0 and 1");
  BasicBlock<float> flat(4);
  s = flat.Configure({4, 8}).status();
  EXPECT_NE(s.message().find("[C, H, W], got [4, 8]"), std::string::npos) << s;
}

// Runs `block` against relu(main(x) + shortcut(x)) with `main` chained by
// hand and the shortcut torchvision uses (1x1 convolution with `stride` and
// batch norm when the shape changes, else the identity), the parameters
// copied entry by entry: checks the wiring (strides, padding, kernel sizes,
// shortcut, final ReLU) and that the block declares its parameters in the
// chain's order.
void ExpectMatchesHandChain(Layer<double>& block, const Shape& in_shape,
                            int64_t stride,
                            const std::vector<Layer<double>*>& main) {
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

  Shape out_shape = in_shape;
  for (Layer<double>* l : main) {
    absl::StatusOr<Shape> next = l->Configure(out_shape);
    ASSERT_TRUE(next.ok()) << next.status();
    out_shape = *next;
  }
  Conv2d<double> down({out_shape[0], 1, stride, 0, false});
  BatchNorm2d<double> down_bn;
  std::vector<Layer<double>*> shortcut;
  if (out_shape != in_shape) {
    shortcut = {&down, &down_bn};
    ASSERT_TRUE(down.Configure(in_shape).ok());
    ASSERT_TRUE(down_bn.Configure(out_shape).ok());
  }
  std::vector<Layer<double>*> chain = main;
  chain.insert(chain.end(), shortcut.begin(), shortcut.end());
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

  TensorD x({in_shape[0], 3, in_shape[1], in_shape[2]});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = normal(rng);
  TensorD out;
  block.Forward(x, &out, Mode::kTrain);

  // Each branch's activations, one tensor per layer (layers keep pointers
  // to their inputs).
  std::vector<TensorD> acts(chain.size());
  const TensorD* branch_out[2] = {&x, &x};
  size_t next = 0;
  for (int b = 0; b < 2; ++b) {
    for (Layer<double>* l : b == 0 ? main : shortcut) {
      l->Forward(*branch_out[b], &acts[next], Mode::kTrain);
      branch_out[b] = &acts[next++];
    }
  }
  ASSERT_EQ(out.shape(), branch_out[0]->shape());
  for (int64_t i = 0; i < out.size(); ++i) {
    const double want =
        std::max((*branch_out[0])[i] + (*branch_out[1])[i], 0.0);
    ASSERT_NEAR(out[i], want, 1e-12) << i;
  }
}

void ExpectBasicBlockMatchesHandChain(int64_t in_c, int64_t out_c,
                                      int64_t stride) {
  BasicBlock<double> block(out_c, stride);
  Conv2d<double> conv1({out_c, 3, stride, 1, false});
  Conv2d<double> conv2({out_c, 3, 1, 1, false});
  BatchNorm2d<double> bn1, bn2;
  ReLU<double> relu;
  ExpectMatchesHandChain(block, {in_c, 6, 6}, stride,
                         {&conv1, &bn1, &relu, &conv2, &bn2});
}

// Finite differences over every input and parameter of `block` on a batch
// of `batch` samples of per-sample shape `in`.
void ExpectGradientsMatch(Layer<double>& block, const Shape& in,
                          int64_t batch) {
  const absl::Status s =
      CheckLayerGradients(block, in, {in[0], batch, in[1], in[2]});
  EXPECT_TRUE(s.ok()) << block.Name() << ": " << s;
}

TEST(BasicBlock, IdentityBlockMatchesHandChain) {
  ExpectBasicBlockMatchesHandChain(4, 4, 1);
}

TEST(BasicBlock, DownsampleBlockMatchesHandChain) {
  ExpectBasicBlockMatchesHandChain(3, 5, 2);
}

TEST(BasicBlock, GradientsMatchFiniteDifferences) {
  BasicBlock<double> identity(3), downsample(4, 2);
  ExpectGradientsMatch(identity, {3, 5, 5}, 2);
  ExpectGradientsMatch(downsample, {2, 6, 6}, 3);
}

TEST(Bottleneck, ParameterNamesFollowTorchvisionStateDict) {
  // torchvision's resnet50 layer1[0]: 64 -> 256 (width 64), stride 1; the
  // channel change alone brings the downsample.
  Bottleneck<float> block(256);
  absl::StatusOr<Shape> out = block.Configure({64, 8, 8});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, Shape({256, 8, 8}));
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const ParamDecl& d : block.Params()) {
    names.push_back(d.name);
    shapes.push_back(d.shape);
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "conv1.weight", "bn1.weight", "bn1.bias", "conv2.weight",
                       "bn2.weight", "bn2.bias", "conv3.weight", "bn3.weight",
                       "bn3.bias", "downsample.0.weight", "downsample.1.weight",
                       "downsample.1.bias"}));
  EXPECT_EQ(shapes, (std::vector<Shape>{{64, 64, 1, 1},
                                        {64},
                                        {64},
                                        {64, 64, 3, 3},
                                        {64},
                                        {64},
                                        {256, 64, 1, 1},
                                        {256},
                                        {256},
                                        {256, 64, 1, 1},
                                        {256},
                                        {256}}));
  // Running mean and variance of bn1, bn2, bn3 and downsample.1.
  EXPECT_EQ(block.Buffers().size(), 8u);
  EXPECT_EQ(block.Name(), "bottleneck(64->256, s1)");
}

TEST(Bottleneck, SameShapeKeepsTheIdentityShortcut) {
  Bottleneck<float> block(16);
  absl::StatusOr<Shape> out = block.Configure({16, 5, 5});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, Shape({16, 5, 5}));
  EXPECT_EQ(block.Params().size(), 9u);
  EXPECT_EQ(block.Params().back().name, "bn3.bias");
  EXPECT_EQ(block.Buffers().size(), 6u);
}

TEST(Bottleneck, StrideHalvesTheResolution) {
  Bottleneck<float> block(32, 2);
  absl::StatusOr<Shape> out = block.Configure({32, 7, 7});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, Shape({32, 4, 4}));
  // Same channels, but the stride brings the downsample.
  EXPECT_EQ(block.Params().size(), 12u);
  EXPECT_EQ(block.Name(), "bottleneck(32->32, s2)");
}

TEST(Bottleneck, RejectsBadArguments) {
  struct Case {
    int64_t out_channels, stride;
    Shape in;
    const char* message;
  };
  const Case cases[] = {
      {6, 1, {4, 8, 8}, "got 6 and 1"},        {0, 1, {4, 8, 8}, "got 0 and 1"},
      {-4, 1, {4, 8, 8}, "got -4 and 1"},      {8, 0, {4, 8, 8}, "got 8 and 0"},
      {8, 1, {4, 8}, "[C, H, W], got [4, 8]"},
  };
  Bottleneck<float> odd(6);
  EXPECT_EQ(odd.Configure({4, 8, 8}).status().message(),
            "bottleneck: out_channels must be a positive multiple of 4 and "
            "stride at least 1, got 6 and 1");
  Bottleneck<float> flat(8);
  EXPECT_EQ(flat.Configure({4, 8}).status().message(),
            "bottleneck: expected a per-sample input of shape [C, H, W], got "
            "[4, 8]");
  for (const Case& c : cases) {
    Bottleneck<float> block(c.out_channels, c.stride);
    const absl::Status s = block.Configure(c.in).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s;
  }
}

void ExpectBottleneckMatchesHandChain(int64_t in_c, int64_t out_c,
                                      int64_t stride) {
  const int64_t w = out_c / 4;
  Bottleneck<double> block(out_c, stride);
  // torchvision v1.5: the stride on the 3x3, not on the first 1x1.
  Conv2d<double> conv1({w, 1, 1, 0, false});
  Conv2d<double> conv2({w, 3, stride, 1, false});
  Conv2d<double> conv3({out_c, 1, 1, 0, false});
  BatchNorm2d<double> bn1, bn2, bn3;
  ReLU<double> relu1, relu2;
  ExpectMatchesHandChain(
      block, {in_c, 6, 6}, stride,
      {&conv1, &bn1, &relu1, &conv2, &bn2, &relu2, &conv3, &bn3});
}

TEST(Bottleneck, IdentityBlockMatchesHandChain) {
  ExpectBottleneckMatchesHandChain(8, 8, 1);
}

TEST(Bottleneck, DownsampleBlockMatchesHandChain) {
  ExpectBottleneckMatchesHandChain(3, 8, 2);
}

TEST(Bottleneck, GradientsMatchFiniteDifferences) {
  // Identity shortcut; a downsample for the channels alone (stride 1); a
  // strided downsample.
  Bottleneck<double> identity(8), widening(8), strided(8, 2);
  ExpectGradientsMatch(identity, {8, 4, 4}, 2);
  ExpectGradientsMatch(widening, {3, 4, 4}, 2);
  ExpectGradientsMatch(strided, {4, 5, 5}, 3);
}

// A float block with the channel-blocked layout against the same block on
// batch-inner activations: output, running statistics, input and parameter
// gradients after a training step, then an evaluation output.
template <typename Block>
void ExpectBlockedMatchesBatchInner(int64_t out_c, int64_t stride,
                                    const Shape& in, int64_t batch) {
  Block blocked(out_c, stride), plain(out_c, stride);
  plain.set_channel_blocked(false);
  ASSERT_TRUE(blocked.Configure(in).ok());
  ASSERT_TRUE(plain.Configure(in).ok());
  ASSERT_EQ(plain.channel_block(), 0);
  if (NativeChannelBlock() == 0) {
    GTEST_SKIP() << "no channel-blocked layout on this machine";
  }
  ASSERT_EQ(blocked.channel_block(), NativeChannelBlock());
  ParamStore<float> stores[2];
  Layer<float>* layers[2] = {&blocked, &plain};
  for (int i = 0; i < 2; ++i) {
    Layer<float>* one[] = {layers[i]};
    stores[i].Build(one);
    Rng rng(7);
    stores[i].Initialize(rng);
  }
  Rng rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor x({in[0], batch, in[1], in[2]}), out[2], dy, grad_in[2], eval[2];
  for (int64_t i = 0; i < x.size(); ++i) x[i] = normal(rng);
  for (int i = 0; i < 2; ++i) layers[i]->Forward(x, &out[i], Mode::kTrain);
  ExpectTensorsClose(out[0], out[1], 2e-5, "output");
  dy.Resize(out[1].shape());
  for (int64_t i = 0; i < dy.size(); ++i) dy[i] = normal(rng);
  for (int i = 0; i < 2; ++i) layers[i]->Backward(dy, &grad_in[i]);
  ExpectTensorsClose(grad_in[0], grad_in[1], 2e-5, "input gradient");
  ExpectTensorsClose(stores[0].grads(), stores[1].grads(), 2e-5,
                     "parameter gradients");
  const auto buffers = blocked.Buffers(), plain_buffers = plain.Buffers();
  ASSERT_EQ(buffers.size(), plain_buffers.size());
  for (size_t b = 0; b < buffers.size(); ++b) {
    ExpectTensorsClose(*buffers[b], *plain_buffers[b], 2e-5,
                       "running statistics");
  }
  for (int i = 0; i < 2; ++i) layers[i]->Forward(x, &eval[i], Mode::kEval);
  ExpectTensorsClose(eval[0], eval[1], 2e-5, "evaluation output");
}

TEST(Bottleneck, ChannelBlockedMatchesBatchInner) {
  // A strided downsample, and the identity shortcut.
  // Width 64: oneDNN's 1x1 convolutions win from 64 channels a side.
  ExpectBlockedMatchesBatchInner<Bottleneck<float>>(256, 2, {128, 9, 9}, 3);
  ExpectBlockedMatchesBatchInner<Bottleneck<float>>(256, 1, {256, 6, 6}, 2);
}

TEST(BasicBlock, ChannelBlockedMatchesBatchInner) {
  // Batch 4: 16 Winograd tiles, which evaluation runs on Winograd too.
  ExpectBlockedMatchesBatchInner<BasicBlock<float>>(32, 1, {32, 7, 7}, 4);
  ExpectBlockedMatchesBatchInner<BasicBlock<float>>(64, 2, {32, 8, 8}, 2);
}

TEST(BasicBlock, NarrowChannelsStayBatchInner) {
  // 12 channels: the direct kernels beat oneDNN (OnednnWins).
  BasicBlock<float> block(12);
  ASSERT_TRUE(block.Configure({12, 5, 5}).ok());
  EXPECT_EQ(block.channel_block(), 0);
}

}  // namespace
}  // namespace cohort

// Residual blocks that hand channel-blocked activations to each other
// (Model's neighbour hand-over, worker/layers/layer.h) train and evaluate as
// the same blocks on the engine's batch-inner layout do.
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backward_helper.h"
#include "kernels/channel_blocked.h"
#include "kernels/onednn_threads.h"
#include "worker/layers/batchnorm.h"
#include "worker/layers/conv.h"
#include "worker/layers/residual.h"
#include "worker/layers/tensor_expect.h"
#include "worker/model.h"

namespace cohort {
namespace {

std::unique_ptr<Model<float>> ThreeBlocks(bool blocked) {
  Model<float>::LayerList layers;
  // Widths of 64 and more, where oneDNN runs every convolution.
  layers.push_back(std::make_unique<Bottleneck<float>>(256, 1));
  layers.push_back(std::make_unique<Bottleneck<float>>(256, 1));
  layers.push_back(std::make_unique<BasicBlock<float>>(64, 2));
  for (auto& l : layers) {
    static_cast<ResidualBlock<float>*>(l.get())->set_channel_blocked(blocked);
  }
  std::vector<ResidualBlock<float>*> blocks;
  for (auto& l : layers) {
    blocks.push_back(static_cast<ResidualBlock<float>*>(l.get()));
  }
  auto model = Model<float>::Create(std::move(layers), {64, 8, 8});
  EXPECT_TRUE(model.ok()) << model.status();
  (*model)->InitializeParameters(5);
  for (ResidualBlock<float>* b : blocks) {
    EXPECT_EQ(b->channel_block(), blocked ? NativeChannelBlock() : 0)
        << b->Name();
  }
  return *std::move(model);
}

TEST(BlockedModel, NeighboursHandOverBlockedActivations) {
  if (NativeChannelBlock() == 0) {
    GTEST_SKIP() << "no channel-blocked layout on this machine";
  }
  auto blocked = ThreeBlocks(true), plain = ThreeBlocks(false);
  Rng rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor x({64, 3, 8, 8});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = normal(rng);
  for (int step = 0; step < 2; ++step) {
    const Tensor& y = blocked->Forward(x, Mode::kTrain);
    const Tensor& want = plain->Forward(x, Mode::kTrain);
    ExpectTensorsClose(y, want, 5e-5, "training output");
    Tensor dy(want.shape());
    for (int64_t i = 0; i < dy.size(); ++i) dy[i] = normal(rng);
    blocked->Backward(dy);
    plain->Backward(dy);
    ExpectTensorsClose(blocked->grads(), plain->grads(), 5e-5,
                       "parameter gradients");
  }
  ExpectTensorsClose(blocked->Forward(x, Mode::kEval),
                     plain->Forward(x, Mode::kEval), 5e-5, "evaluation output");
}

TEST(BlockedModel, FrozenParametersEvaluateTheSame) {
  if (NativeChannelBlock() == 0) {
    GTEST_SKIP() << "no channel-blocked layout on this machine";
  }
  auto frozen = ThreeBlocks(true), plain = ThreeBlocks(true);
  frozen->FreezeParameters();
  Rng rng(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // The converted weights serve every batch. The 3x3 layers run on
  // Winograd kernels from batch 4 (16 tiles) on nChw8c and from batch 12
  // (48 tiles) on nChw16c, below that on oneDNN's direct kernels.
  for (int batch : {3, 4, 2, 4, 12}) {
    Tensor x({64, batch, 8, 8});
    for (int64_t i = 0; i < x.size(); ++i) x[i] = normal(rng);
    const Tensor& want = plain->Forward(x, Mode::kEval);
    const Tensor& got = frozen->Forward(x, Mode::kEval);
    ASSERT_EQ(got.shape(), want.shape());
    for (int64_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i], want[i]) << "batch " << batch << " element " << i;
    }
  }
}

// Two convolutions on the model's own input gradients, then residual
// blocks: every layer's activations are small, so at two compute threads
// Backward hands the weight gradients to a helper thread.
std::unique_ptr<Model<float>> ConvsThenBlocks() {
  Model<float>::LayerList layers;
  for (int i = 0; i < 2; ++i) {
    layers.push_back(std::make_unique<Conv2d<float>>(
        ConvOptions{.out_channels = 64, .kernel = 3, .padding = 1}));
    layers.push_back(std::make_unique<BatchNorm2d<float>>());
  }
  layers.push_back(std::make_unique<BasicBlock<float>>(64, 1));
  layers.push_back(std::make_unique<BasicBlock<float>>(128, 2));
  layers.push_back(std::make_unique<BasicBlock<float>>(256, 2));
  auto model = Model<float>::Create(std::move(layers), {64, 8, 8});
  EXPECT_TRUE(model.ok()) << model.status();
  (*model)->InitializeParameters(8);
  return *std::move(model);
}

// With the helper thread, every gradient has the bits of a one-thread
// backward, and each ready(offset) comes once the gradients from `offset`
// on are final.
TEST(BlockedModel, HelperThreadGivesTheGradientsOfOneThread) {
  auto helped = ConvsThenBlocks(), alone = ConvsThenBlocks();
  Rng rng(12);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor x({64, 4, 8, 8});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = normal(rng);
  for (int step = 0; step < 2; ++step) {
    SetOnednnThreads(1);
    const Tensor& out = alone->Forward(x, Mode::kTrain);
    Tensor dy(out.shape());
    for (int64_t i = 0; i < dy.size(); ++i) dy[i] = normal(rng);
    alone->Backward(dy);
    helped->Forward(x, Mode::kTrain);
    SetOnednnThreads(2);
    const Tensor& grads = helped->grads();
    std::vector<std::pair<int64_t, std::vector<float>>> readies;
    bool under_helper = true;
    helped->Backward(dy, [&](int64_t offset) {
      under_helper = under_helper && BackwardHelper::Current() != nullptr;
      readies.push_back(
          {offset, std::vector<float>(grads.data() + offset,
                                      grads.data() + grads.size())});
    });
    SetOnednnThreads(0);
    EXPECT_TRUE(under_helper) << "step " << step;
    const Tensor& want = alone->grads();
    ASSERT_EQ(grads.size(), want.size());
    EXPECT_EQ(std::memcmp(grads.data(), want.data(), want.size() * 4), 0)
        << "step " << step;
    ASSERT_FALSE(readies.empty());
    EXPECT_EQ(readies.back().first, 0);
    for (size_t r = 0; r < readies.size(); ++r) {
      const auto& [offset, seen] = readies[r];
      if (r > 0) {
        EXPECT_LE(offset, readies[r - 1].first);
      }
      EXPECT_EQ(std::memcmp(seen.data(), want.data() + offset, seen.size() * 4),
                0)
          << "ready(" << offset << ") before its gradients were final";
    }
  }
}

}  // namespace
}  // namespace cohort

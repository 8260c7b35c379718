// Milliseconds per training step (forward + backward) of ResNet's residual
// blocks at the shapes of resnet50 (224x224, batch 8) and resnet18_cifar
// (batch 32), with activations kept in oneDNN's channel-blocked layout
// inside the block (the default where it applies) and on the batch-inner
// layout with a reorder around every convolution pass. The two run
// alternately, best of 7 x 4 steps each, so that a busy machine slows both:
//   bazel build //bench:residual_bench && bazel-bin/bench/residual_bench
// Threads: OMP_NUM_THREADS (oneDNN's and the engine's loops). An argument
// keeps only the blocks whose name contains it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>

#include "kernels/channel_blocked.h"
#include "worker/layers/param_store.h"
#include "worker/layers/residual.h"

namespace cohort {
namespace {

struct Case {
  const char* name;
  bool bottleneck;
  int64_t out_channels, stride;
  Shape sample;
  int64_t batch;
};

// One block, its parameters and a batch, ready to step.
struct Bench {
  std::unique_ptr<ResidualBlock<float>> block;
  ParamStore<float> store;
  Tensor x, y, dy, dx;

  Bench(const Case& c, bool blocked) {
    if (c.bottleneck) {
      block = std::make_unique<Bottleneck<float>>(c.out_channels, c.stride);
    } else {
      block = std::make_unique<BasicBlock<float>>(c.out_channels, c.stride);
    }
    block->set_channel_blocked(blocked);
    const Shape out = *block->Configure(c.sample);
    Layer<float>* list[] = {block.get()};
    store.Build(list);
    Rng rng(1);
    store.Initialize(rng);
    std::normal_distribution<float> normal(0, 1);
    x.Resize({c.sample[0], c.batch, c.sample[1], c.sample[2]});
    for (int64_t i = 0; i < x.size(); ++i) x[i] = normal(rng);
    dy.Resize({out[0], c.batch, out[1], out[2]});
    for (int64_t i = 0; i < dy.size(); ++i) dy[i] = normal(rng);
    Step();
  }
  void Step() {
    block->Forward(x, &y, Mode::kTrain);
    block->Backward(dy, &dx);
  }
  double Ms(int steps) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) Step();
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now() - t0)
               .count() /
           steps;
  }
};

void RunCase(const Case& c) {
  Bench blocked(c, true), plain(c, false);
  double best_blocked = 1e30, best_plain = 1e30;

  for (int rep = 0; rep < 7; ++rep) {
    best_blocked = std::min(best_blocked, blocked.Ms(4));
    best_plain = std::min(best_plain, plain.Ms(4));
  }
  std::printf("%-34s %9.2f %9.2f %7.2fx%s\n", c.name, best_plain, best_blocked,
              best_plain / best_blocked,
              blocked.block->channel_block() == 0 ? "  (not blocked)" : "");
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  // An argument keeps only the cases whose name contains it.
  const std::string only = argc > 1 ? argv[1] : "";
  using cohort::Case;
  const Case cases[] = {
      {"r50 layer1.0 64->256 @56", true, 256, 1, {64, 56, 56}, 8},
      {"r50 layer1.1 256->256 @56", true, 256, 1, {256, 56, 56}, 8},
      {"r50 layer2.0 256->512 s2 @56", true, 512, 2, {256, 56, 56}, 8},
      {"r50 layer2.1 512->512 @28", true, 512, 1, {512, 28, 28}, 8},
      {"r50 layer3.0 512->1024 s2 @28", true, 1024, 2, {512, 28, 28}, 8},
      {"r50 layer3.1 1024->1024 @14", true, 1024, 1, {1024, 14, 14}, 8},
      {"r50 layer4.0 1024->2048 s2 @14", true, 2048, 2, {1024, 14, 14}, 8},
      {"r50 layer4.1 2048->2048 @7", true, 2048, 1, {2048, 7, 7}, 8},
      {"r18c layer1 64->64 @32", false, 64, 1, {64, 32, 32}, 32},
      {"r18c layer2.0 64->128 s2 @32", false, 128, 2, {64, 32, 32}, 32},
      {"r18c layer3.1 256->256 @8", false, 256, 1, {256, 8, 8}, 32},
  };
  std::printf("channel block %lld; ms per forward + backward, best of 7 x 4\n",
              static_cast<long long>(cohort::NativeChannelBlock()));
  std::printf("%-34s %9s %9s %8s\n", "block", "reorders", "blocked", "ratio");
  for (const Case& c : cases) {
    if (std::string(c.name).find(only) != std::string::npos) {
      cohort::RunCase(c);
    }
  }
  return 0;
}

// ConvBackward's two passes side by side on a team of two threads: each
// pass runs alone on its thread, so both gradients have the bits of a
// one-thread run, on batch-inner and channel-blocked activations, and one
// workspace may switch between running the passes in turn and side by side.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/channel_blocked.h"
#include "kernels/conv.h"
#include "kernels/onednn_threads.h"

namespace cohort {
namespace {

ConvGeometry Conv2(int64_t n, int64_t c, int64_t h, int64_t oc, int64_t k,
                   int64_t s, int64_t p) {
  ConvGeometry g;
  g.batch = n;
  g.in_channels = c;
  g.in_h = g.in_w = h;
  g.out_channels = oc;
  g.kernel_h = g.kernel_w = k;
  g.stride = s;
  g.pad_h = g.pad_w = p;
  return g;
}

// A ResNet block's shapes: 3x3 at stride 1 and 2, a 1x1 projection, and
// two layers of ResNet-18 whose weight gradient oneDNN sums in another
// order on two threads than on one (so that a pass run on two threads
// would not give the bits checked).
std::vector<ConvGeometry> Shapes() {
  return {Conv2(8, 32, 8, 32, 3, 1, 1), Conv2(4, 32, 6, 64, 3, 2, 1),
          Conv2(4, 16, 6, 48, 1, 2, 0), Conv2(32, 64, 8, 64, 3, 1, 1),
          Conv2(16, 64, 16, 64, 3, 1, 1)};
}

struct Operands {
  std::vector<float> in, w, b, dy;
};

Operands Random(const ConvGeometry& g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random = [&](int64_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
  };
  // In whichever layout the workspace reads: the values are random either
  // way, and the comparisons are between runs of one layout.
  return {random(g.in_channels * g.batch * g.in_h * g.in_w),
          random(g.out_channels * g.patch()), random(g.out_channels),
          random(g.out_channels * g.positions())};
}

struct Gradients {
  std::vector<float> w, b, in;
};

// A forward and ConvBackward on `ws` at `threads` compute threads.
Gradients Backward(const ConvGeometry& g, const Operands& x, int threads,
                   SideBySide mode, ConvWorkspace<float>* ws) {
  SetOnednnThreads(threads);
  ws->side_by_side = mode;
  std::vector<float> out(x.dy.size());
  ConvForward<float>(g, x.in.data(), x.w.data(), x.b.data(), out.data(), ws);
  Gradients r{std::vector<float>(x.w.size(), -99.0f),
              std::vector<float>(x.b.size(), -99.0f),
              std::vector<float>(x.in.size(), -99.0f)};
  ConvBackward<float>(g, x.dy.data(), x.w.data(), r.w.data(), r.b.data(),
                      r.in.data(), ws);
  SetOnednnThreads(0);
  return r;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void ExpectSameBits(const Gradients& got, const Gradients& want,
                    const std::string& what) {
  EXPECT_TRUE(SameBits(got.w, want.w)) << what << ": weight gradient";
  EXPECT_TRUE(SameBits(got.b, want.b)) << what << ": bias gradient";
  EXPECT_TRUE(SameBits(got.in, want.in)) << what << ": input gradient";
}

// Each shape on batch-inner activations (oneDNN forced) and on this
// machine's channel-blocked ones.
template <typename Fn>
void ForEachCase(const Fn& fn) {
  for (const ConvGeometry& g : Shapes()) {
    for (const int64_t block : {int64_t{0}, NativeChannelBlock()}) {
      SCOPED_TRACE("OC " + std::to_string(g.out_channels) + " block " +
                   std::to_string(block));
      const auto make = [&] {
        ConvWorkspace<float> ws;
        ws.channel_block = block;
        ws.algorithm = ConvAlgorithm::kOnednn;
        return ws;
      };
      fn(g, make);
      if (NativeChannelBlock() == 0) break;  // no blocked layout here
    }
  }
}

TEST(ConvBackwardSideBySide, GivesTheBitsOfOneThread) {
  ForEachCase([](const ConvGeometry& g, const auto& make) {
    const Operands x = Random(g, 7);
    ConvWorkspace<float> one = make(), two = make();
    const Gradients want = Backward(g, x, 1, SideBySide::kNever, &one);
    ExpectSameBits(Backward(g, x, 2, SideBySide::kAlways, &two), want,
                   "side by side");
  });
}

// A workspace that ran its backward primitives on both threads builds them
// again for one thread each, and back: a primitive built for two threads
// and run on one would compute only the first thread's share.
TEST(ConvBackwardSideBySide, OneWorkspaceSwitchesBetweenTheWays) {
  ForEachCase([](const ConvGeometry& g, const auto& make) {
    const Operands x = Random(g, 11);
    ConvWorkspace<float> one = make(), in_turn = make(), ws = make();
    const Gradients want_one = Backward(g, x, 1, SideBySide::kNever, &one);
    const Gradients want_two = Backward(g, x, 2, SideBySide::kNever, &in_turn);
    for (int round = 0; round < 2; ++round) {
      ExpectSameBits(Backward(g, x, 2, SideBySide::kNever, &ws), want_two,
                     "in turn, round " + std::to_string(round));
      ExpectSameBits(Backward(g, x, 2, SideBySide::kAlways, &ws), want_one,
                     "side by side, round " + std::to_string(round));
    }
  });
}

TEST(ConvBackwardSideBySide, WeightGradientAloneWithoutAnInputGradient) {
  ForEachCase([](const ConvGeometry& g, const auto& make) {
    const Operands x = Random(g, 13);
    ConvWorkspace<float> one = make(), ws = make();
    const Gradients want = Backward(g, x, 1, SideBySide::kNever, &one);
    SetOnednnThreads(2);
    ws.side_by_side = SideBySide::kAlways;
    std::vector<float> out(x.dy.size()), gw(x.w.size()), gb(x.b.size());
    ConvForward<float>(g, x.in.data(), x.w.data(), x.b.data(), out.data(), &ws);
    ConvBackward<float>(g, x.dy.data(), x.w.data(), gw.data(), gb.data(),
                        nullptr, &ws);
    SetOnednnThreads(0);
    EXPECT_EQ(gw.size(), want.w.size());
    // At two threads oneDNN may add the weight gradient's partial sums in
    // another order: equal within float rounding, not in bits.
    for (size_t i = 0; i < gw.size(); ++i) {
      ASSERT_NEAR(gw[i], want.w[i], 1e-3f * (1.0f + std::abs(want.w[i])))
          << "weight " << i;
    }
  });
}

}  // namespace
}  // namespace cohort

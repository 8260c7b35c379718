// oneDNN's passes (ConvAlgorithm::kOnednn) and the Winograd kernels, the
// algorithms of channel-blocked activations, against im2col in double, which
// covers every geometry ConvGeometry expresses (asymmetric padding, a
// height stride of its own, dilation); and the backward passes run side by
// side on two threads against one thread, bit for bit.
#include "kernels/conv_onednn.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backward_helper.h"
#include "kernels/channel_blocked.h"
#include "kernels/conv.h"
#include "kernels/onednn_threads.h"

namespace cohort {
namespace {

template <typename T>
struct Passes {
  std::vector<T> out, grad_w, grad_b, grad_in;
};

template <typename T>
Passes<T> Run(const ConvGeometry& g, ConvAlgorithm algorithm,
              const std::vector<double>& in, const std::vector<double>& w,
              const std::vector<double>& b, const std::vector<double>& dy,
              ConvWorkspace<T>* ws) {
  const std::vector<T> tin(in.begin(), in.end()), tw(w.begin(), w.end()),
      tb(b.begin(), b.end()), tdy(dy.begin(), dy.end());
  Passes<T> r;
  r.out.assign(dy.size(), T(-99));
  r.grad_w.assign(w.size(), T(-99));
  r.grad_b.assign(b.size(), T(-99));
  r.grad_in.assign(in.size(), T(-99));
  ws->algorithm = algorithm;
  ConvForward<T>(g, tin.data(), tw.data(), tb.data(), r.out.data(), ws);
  ConvBackwardWeights<T>(g, tdy.data(), r.grad_w.data(), r.grad_b.data(), ws);
  ConvBackwardInput<T>(g, tdy.data(), tw.data(), r.grad_in.data(), ws);
  return r;
}

// Run<float> on activations kept in nChw{block}c (ConvWorkspace::
// channel_block), converted at the edges; results in batch-inner layout.
Passes<float> RunBlocked(const ConvGeometry& g, int64_t block,
                         ConvAlgorithm algorithm, const std::vector<double>& in,
                         const std::vector<double>& w,
                         const std::vector<double>& b,
                         const std::vector<double>& dy) {
  const std::vector<float> fin(in.begin(), in.end()), fdy(dy.begin(), dy.end());
  const int64_t in_p = g.in_h * g.in_w, out_p = g.out_h() * g.out_w();
  std::vector<float> bin(fin.size()), bdy(fdy.size());
  ToChannelBlocked(fin.data(), g.in_channels, g.batch, in_p, block, bin.data());
  ToChannelBlocked(fdy.data(), g.out_channels, g.batch, out_p, block,
                   bdy.data());
  ConvWorkspace<float> ws;
  ws.channel_block = block;
  Passes<float> r =
      Run<float>(g, algorithm, std::vector<double>(bin.begin(), bin.end()), w,
                 b, std::vector<double>(bdy.begin(), bdy.end()), &ws);
  std::vector<float> out(r.out.size()), grad_in(r.grad_in.size());
  FromChannelBlocked(r.out.data(), g.out_channels, g.batch, out_p, block,
                     out.data());
  FromChannelBlocked(r.grad_in.data(), g.in_channels, g.batch, in_p, block,
                     grad_in.data());
  r.out = out;
  r.grad_in = grad_in;
  return r;
}

// max |got - want| <= rtol * max |want|, naming the first bad index.
::testing::AssertionResult Close(const std::vector<float>& got,
                                 const std::vector<double>& want) {
  constexpr double kRtol = 2e-5;
  double scale = 1e-30;
  for (double x : want) scale = std::max(scale, std::abs(x));
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= kRtol * scale)) {
      return ::testing::AssertionFailure()
             << "index " << i << ": got " << got[i] << ", want " << want[i]
             << " (scale " << scale << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

std::string Describe(const ConvGeometry& g) {
  return "N" + std::to_string(g.batch) + " C" + std::to_string(g.in_channels) +
         " " + std::to_string(g.in_h) + "x" + std::to_string(g.in_w) + " OC" +
         std::to_string(g.out_channels) + " k" + std::to_string(g.kernel_h) +
         "x" + std::to_string(g.kernel_w) + " s" +
         std::to_string(g.row_stride()) + "," + std::to_string(g.stride) +
         " p" + std::to_string(g.pad_h) + "+" + std::to_string(g.extra_h) +
         "," + std::to_string(g.pad_w) + "+" + std::to_string(g.extra_w) +
         " d" + std::to_string(g.dilation) + " g" + std::to_string(g.groups);
}

// Random operands of g and im2col's passes on them in double.
struct Case {
  std::vector<double> in, w, b, dy;
  Passes<double> want;
};

Case MakeCase(const ConvGeometry& g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto random = [&](int64_t n) {
    std::vector<double> v(n);
    for (double& x : v) x = normal(rng);
    return v;
  };
  Case c;
  c.in = random(g.in_channels * g.batch * g.in_h * g.in_w);
  c.w = random(g.out_channels * g.patch());
  c.b = random(g.out_channels);
  c.dy = random(g.out_channels * g.positions());
  ConvWorkspace<double> ref_ws;
  c.want =
      Run<double>(g, ConvAlgorithm::kIm2col, c.in, c.w, c.b, c.dy, &ref_ws);
  return c;
}

void ExpectClose(const Passes<float>& got, const Passes<double>& want) {
  EXPECT_TRUE(Close(got.out, want.out)) << "forward";
  EXPECT_TRUE(Close(got.grad_w, want.grad_w)) << "weight gradient";
  EXPECT_TRUE(Close(got.grad_b, want.grad_b)) << "bias gradient";
  EXPECT_TRUE(Close(got.grad_in, want.grad_in)) << "input gradient";
}

// ws null: channel-blocked activations in blocks of NativeChannelBlock().
void CheckOnednn(const ConvGeometry& g, ConvWorkspace<float>* ws,
                 uint64_t seed = 3) {
  SCOPED_TRACE(Describe(g));
  const Case c = MakeCase(g, seed);
  ExpectClose(
      ws != nullptr
          ? Run<float>(g, ConvAlgorithm::kOnednn, c.in, c.w, c.b, c.dy, ws)
          : RunBlocked(g, NativeChannelBlock(), ConvAlgorithm::kAuto, c.in, c.w,
                       c.b, c.dy),
      c.want);
}

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

// The ResNet convolutions in small: 3x3 stride 1 and 2, 1x1 stride 1 and
// 2, the 7x7 stride-2 stem; channel counts off and on oneDNN's blocks of 8
// and 16.
std::vector<ConvGeometry> ResNetShapes() {
  return {
      Conv2(5, 16, 10, 16, 3, 1, 1), Conv2(1, 64, 8, 64, 3, 1, 1),
      Conv2(5, 24, 9, 40, 3, 2, 1),  Conv2(1, 32, 6, 64, 1, 1, 0),
      Conv2(5, 64, 7, 24, 1, 2, 0),  Conv2(2, 3, 23, 16, 7, 2, 3),
      Conv2(5, 3, 6, 5, 3, 1, 1),    Conv2(1, 17, 5, 33, 3, 1, 1),
  };
}

TEST(ConvOnednn, MatchesIm2colOnResNetShapes) {
  for (const ConvGeometry& g : ResNetShapes()) {
    ConvWorkspace<float> ws;
    CheckOnednn(g, &ws);
  }
}

TEST(ConvOnednn, MatchesIm2colOnRectangularAsymmetricAndDilated) {
  ConvGeometry rect = Conv2(2, 6, 9, 10, 3, 1, 1);
  rect.in_w = 13;
  rect.kernel_w = 5;
  rect.stride_h = 2;  // a height stride of its own
  rect.pad_w = 2;
  ConvGeometry same = Conv2(5, 8, 8, 12, 4, 1, 1);  // padding SAME, even k
  same.extra_h = same.extra_w = 1;
  ConvGeometry same_s2 = Conv2(1, 5, 9, 7, 3, 2, 0);
  same_s2.extra_h = same_s2.extra_w = 1;
  ConvGeometry dilated = Conv2(2, 12, 11, 20, 3, 1, 2);
  dilated.dilation = 2;
  ConvGeometry conv1d = Conv2(3, 16, 1, 32, 3, 1, 0);
  conv1d.in_w = 40;
  conv1d.kernel_h = 1;
  conv1d.pad_w = 1;
  for (const ConvGeometry& g : {rect, same, same_s2, dilated, conv1d}) {
    ConvWorkspace<float> ws;
    CheckOnednn(g, &ws);
  }
}

TEST(ConvOnednn, MatchesIm2colForEachGroup) {
  ConvGeometry g = Conv2(2, 16, 8, 32, 3, 1, 1);
  g.groups = 2;
  ConvWorkspace<float> ws;
  CheckOnednn(g, &ws);
}

TEST(ConvOnednn, OneWorkspaceFollowsChangingGeometry) {
  // More geometries than the state caches, revisited: every pass must use
  // the primitives and saved input of the current one.
  const std::vector<ConvGeometry> shapes = ResNetShapes();
  ConvWorkspace<float> ws;
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      CheckOnednn(shapes[i], &ws, 10 * round + i);
    }
  }
  // A batch that changes and comes back (a last partial batch, evaluation).
  ConvGeometry g = Conv2(5, 16, 10, 16, 3, 1, 1);
  CheckOnednn(g, &ws, 1);
  g.batch = 2;
  CheckOnednn(g, &ws, 2);
  g.batch = 5;
  CheckOnednn(g, &ws, 3);
}

TEST(ConvOnednn, ForwardWithoutBiasAndInputGradientAlone) {
  // A layer without bias, and a transposed convolution's forward (the
  // input gradient on a fresh workspace, before any forward).
  const ConvGeometry g = Conv2(2, 16, 6, 24, 3, 2, 1);
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> in(16 * 2 * 36), w(24 * 16 * 9), dy(24 * g.positions()),
      out(dy.size()), ref_out(dy.size());
  for (auto* v : {&in, &w, &dy}) {
    for (float& x : *v) x = normal(rng);
  }
  std::vector<float> gi(in.size()), ref_gi(in.size());
  ConvWorkspace<float> ws, ref;
  ws.algorithm = ConvAlgorithm::kOnednn;
  ref.algorithm = ConvAlgorithm::kIm2col;
  ConvBackwardInput<float>(g, dy.data(), w.data(), gi.data(), &ws);
  ConvBackwardInput<float>(g, dy.data(), w.data(), ref_gi.data(), &ref);
  ConvForward<float>(g, in.data(), w.data(), nullptr, out.data(), &ws);
  ConvForward<float>(g, in.data(), w.data(), nullptr, ref_out.data(), &ref);
  EXPECT_TRUE(Close(gi, std::vector<double>(ref_gi.begin(), ref_gi.end())));
  EXPECT_TRUE(Close(out, std::vector<double>(ref_out.begin(), ref_out.end())));
}

TEST(ChannelBlocked, ConversionsPlaceEveryElement) {
  for (int64_t block : {int64_t{8}, int64_t{16}}) {
    const int64_t c = 32, n = 3, p = 5;
    std::vector<float> inner(c * n * p), blocked(inner.size(), -1),
        back(inner.size(), -1);
    for (size_t i = 0; i < inner.size(); ++i) inner[i] = static_cast<float>(i);
    ToChannelBlocked(inner.data(), c, n, p, block, blocked.data());
    for (int64_t ni = 0; ni < n; ++ni) {
      for (int64_t ci = 0; ci < c; ++ci) {
        for (int64_t pi = 0; pi < p; ++pi) {
          const int64_t at =
              ((ni * (c / block) + ci / block) * p + pi) * block + ci % block;
          ASSERT_EQ(blocked[at], inner[(ci * n + ni) * p + pi])
              << "block " << block << " n " << ni << " c " << ci << " p " << pi;
        }
      }
    }
    FromChannelBlocked(blocked.data(), c, n, p, block, back.data());
    EXPECT_EQ(back, inner) << "block " << block;
  }
}

TEST(ConvOnednn, ChannelBlockedActivationsMatchIm2col) {
  const int64_t block = NativeChannelBlock();
  if (block == 0) GTEST_SKIP() << "oneDNN has no AVX2 or AVX-512 code here";
  // ResNet's bottleneck convolutions in small, channels in whole blocks.
  for (const ConvGeometry& g :
       {Conv2(2, 32, 8, 16, 1, 1, 0), Conv2(3, 16, 9, 16, 3, 2, 1),
        Conv2(2, 16, 7, 32, 3, 1, 1), Conv2(2, 32, 8, 64, 1, 2, 0)}) {
    CheckOnednn(g, nullptr);
  }
}

// Images of at most 4 output positions run every pass as one product over
// the patch matrix (conv.cc): on batch-inner and channel-blocked
// activations, stride 1 and 2, and each group of a grouped convolution.
TEST(ConvOnednn, TinyImagesMatchIm2col) {
  const int64_t block = NativeChannelBlock();
  if (block == 0) GTEST_SKIP() << "oneDNN has no AVX2 or AVX-512 code here";
  ConvGeometry grouped = Conv2(2, 64, 2, 64, 3, 1, 1);
  grouped.groups = 2;
  for (const ConvGeometry& g :
       {Conv2(3, 32, 1, 32, 3, 1, 1), Conv2(2, 32, 2, 48, 3, 1, 1),
        Conv2(3, 32, 2, 64, 3, 2, 1), Conv2(2, 64, 3, 32, 3, 2, 1), grouped}) {
    SCOPED_TRACE(Describe(g));
    const Case c = MakeCase(g, 5);
    ConvWorkspace<float> ws;
    ExpectClose(
        cohort::Run<float>(g, ConvAlgorithm::kAuto, c.in, c.w, c.b, c.dy, &ws),
        c.want);
    if (g.groups == 1) {
      EXPECT_TRUE(ws.onednn);
    }
    if (g.groups == 1 && g.out_channels % block == 0) {
      ExpectClose(
          RunBlocked(g, block, ConvAlgorithm::kAuto, c.in, c.w, c.b, c.dy),
          c.want);
    }
  }
}

// Taps that read only padding at every output position (a 3x3 kernel's
// outer ring on a 1x1 map, its outer rows on a 1x4 one, a dilated or 5x5
// kernel's on 2x2) are left out of the tiny-image products; the results
// still match im2col over every tap, and those taps' weight gradients are
// exactly zero.
TEST(ConvOnednn, TinyImagesSkipTapsThatReadOnlyPadding) {
  if (NativeChannelBlock() == 0) {
    GTEST_SKIP() << "oneDNN has no AVX2 or AVX-512 code here";
  }
  ConvGeometry row = Conv2(2, 32, 1, 32, 3, 1, 1);
  row.in_w = 4;
  ConvGeometry dilated = Conv2(2, 32, 2, 32, 3, 1, 2);
  dilated.dilation = 2;
  const struct {
    ConvGeometry g;
    std::vector<int64_t> live;  // the taps that read the image
  } cases[] = {
      {Conv2(3, 32, 1, 32, 3, 1, 1), {4}},
      {row, {3, 4, 5}},
      {dilated, {4}},
      {Conv2(3, 32, 2, 48, 3, 2, 1), {4, 5, 7, 8}},
      {Conv2(2, 16, 2, 32, 5, 1, 2), {6, 7, 8, 11, 12, 13, 16, 17, 18}}};
  for (const auto& k : cases) {
    const ConvGeometry& g = k.g;
    SCOPED_TRACE(Describe(g));
    const Case c = MakeCase(g, 11);
    ConvWorkspace<float> ws;
    const Passes<float> got =
        cohort::Run<float>(g, ConvAlgorithm::kAuto, c.in, c.w, c.b, c.dy, &ws);
    ExpectClose(got, c.want);
    EXPECT_GT(ws.tap_weights.size(), 0) << "the live-tap product did not run";
    const int64_t taps = g.kernel_h * g.kernel_w;
    for (int64_t i = 0; i < static_cast<int64_t>(got.grad_w.size()); ++i) {
      const bool live = std::count(k.live.begin(), k.live.end(), i % taps) > 0;
      if (!live) {
        ASSERT_EQ(got.grad_w[i], 0.0f) << "dead tap " << i % taps;
      } else {
        ASSERT_NE(got.grad_w[i], 0.0f) << "live tap " << i % taps;
      }
    }
  }
}

// The input gradient reuses the live taps' weights that the forward pass
// gathered only when the caller says the weights did not change since
// (ConvWorkspace::weights_as_in_forward): then it gives the same bits as
// gathering them again; without the flag it reads weights changed after
// the forward pass, as a transposed convolution's forward does.
TEST(ConvOnednn, TinyImagesReuseForwardTapWeightsOnlyWhenTold) {
  if (NativeChannelBlock() == 0) {
    GTEST_SKIP() << "oneDNN has no AVX2 or AVX-512 code here";
  }
  const ConvGeometry g = Conv2(3, 32, 1, 48, 3, 1, 1);  // one live tap
  const Case c = MakeCase(g, 12), changed = MakeCase(g, 13);
  const std::vector<float> in(c.in.begin(), c.in.end()),
      w(c.w.begin(), c.w.end()), w2(changed.w.begin(), changed.w.end()),
      dy(c.dy.begin(), c.dy.end());
  auto input_grad = [&](const std::vector<float>& forward_w,
                        const std::vector<float>& backward_w, bool told) {
    ConvWorkspace<float> ws;
    std::vector<float> out(dy.size()), gw(w.size()), gin(in.size());
    ConvForward<float>(g, in.data(), forward_w.data(), nullptr, out.data(),
                       &ws);
    ConvBackwardWeights<float>(g, dy.data(), gw.data(), nullptr, &ws);
    ws.weights_as_in_forward = told;
    ConvBackwardInput<float>(g, dy.data(), backward_w.data(), gin.data(), &ws);
    EXPECT_FALSE(ws.weights_as_in_forward) << "the pass clears the flag";
    EXPECT_GT(ws.tap_weights.size(), 0) << "the live-tap product did not run";
    return gin;
  };
  EXPECT_EQ(input_grad(w, w, true), input_grad(w, w, false));
  EXPECT_EQ(input_grad(w, w2, false), input_grad(w2, w2, false));
  EXPECT_NE(input_grad(w, w2, false), input_grad(w, w, false));
}

ConvGeometry Rect(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc) {
  ConvGeometry g = Conv2(n, c, h, oc, 3, 1, 1);
  g.in_w = w;
  return g;
}

TEST(ConvWinograd, MatchesIm2colOnChannelBlockedActivations) {
  // Images that fill whole 4x4 tiles, end inside one (5, 7, 9, 13), or are
  // smaller than one (1, 2); one and three blocks of 8 channels.
  for (const ConvGeometry& g :
       {Rect(2, 8, 4, 4, 8), Rect(3, 16, 5, 7, 8), Rect(1, 8, 1, 1, 24),
        Rect(2, 24, 9, 6, 16), Rect(1, 64, 8, 8, 64), Rect(2, 8, 13, 2, 16),
        Rect(4, 32, 16, 16, 32)}) {
    SCOPED_TRACE(Describe(g));
    const Case c = MakeCase(g, 7);
    ExpectClose(
        RunBlocked(g, 8, ConvAlgorithm::kWinograd, c.in, c.w, c.b, c.dy),
        c.want);
  }
}

TEST(ConvWinograd, RunsWhereItAppliesAndOtherwiseOnednn) {
  // kAuto on nChw8c picks Winograd for a 3x3 stride-1 convolution padded
  // by 1 and leaves stride 2, 1x1 and unpadded ones to oneDNN.
  struct Want {
    ConvGeometry g;
    bool winograd;
  };
  for (const Want& want : {Want{Conv2(2, 16, 8, 16, 3, 1, 1), true},
                           Want{Conv2(2, 16, 8, 16, 3, 2, 1), false},
                           Want{Conv2(2, 16, 8, 16, 1, 1, 0), false},
                           Want{Conv2(2, 16, 8, 16, 3, 1, 0), false}}) {
    const ConvGeometry& g = want.g;
    SCOPED_TRACE(Describe(g));
    std::vector<float> in(g.in_channels * g.batch * g.in_h * g.in_w, 1.0f),
        w(g.out_channels * g.patch(), 0.5f),
        out(g.out_channels * g.positions());
    ConvWorkspace<float> ws;
    ws.channel_block = 8;
    ConvForward<float>(g, in.data(), w.data(), nullptr, out.data(), &ws);
    EXPECT_EQ(ws.winograd, want.winograd);
    EXPECT_EQ(ws.onednn, !want.winograd);
  }
}

TEST(ConvWinograd, OneWorkspaceFollowsChangingGeometry) {
  // A batch that shrinks and grows again and a wider layer on the same
  // workspace: the saved transform must be the current forward's.
  ConvWorkspace<float> ws;
  for (const ConvGeometry& g : {Rect(3, 16, 6, 6, 8), Rect(1, 16, 6, 6, 8),
                                Rect(2, 32, 5, 9, 16), Rect(3, 16, 6, 6, 8)}) {
    SCOPED_TRACE(Describe(g));
    const Case c = MakeCase(g, 11);
    const int64_t in_p = g.in_h * g.in_w, out_p = g.positions() / g.batch;
    std::vector<float> in(c.in.begin(), c.in.end()),
        dy(c.dy.begin(), c.dy.end());
    std::vector<float> bin(in.size()), bdy(dy.size());
    ToChannelBlocked(in.data(), g.in_channels, g.batch, in_p, 8, bin.data());
    ToChannelBlocked(dy.data(), g.out_channels, g.batch, out_p, 8, bdy.data());
    const std::vector<float> w(c.w.begin(), c.w.end()),
        b(c.b.begin(), c.b.end());
    std::vector<float> out(dy.size()), gw(w.size()), gb(b.size());
    ws.channel_block = 8;
    ConvForward<float>(g, bin.data(), w.data(), b.data(), out.data(), &ws);
    ConvBackwardWeights<float>(g, bdy.data(), gw.data(), gb.data(), &ws);
    EXPECT_TRUE(ws.winograd);
    EXPECT_TRUE(Close(gw, c.want.grad_w));
    EXPECT_TRUE(Close(gb, c.want.grad_b));
  }
}

// ConvForwardScaled on nChw{block}c against the definition,
// relu(conv(in, w) * scale + shift + residual), from im2col's forward in
// double; results in batch-inner layout. An empty `residual`: none.
std::vector<float> RunScaled(const ConvGeometry& g, int64_t block,
                             const Case& c, const std::vector<float>& scale,
                             const std::vector<float>& residual, bool frozen,
                             ConvWorkspace<float>* ws) {
  const int64_t in_p = g.in_h * g.in_w, out_p = g.out_h() * g.out_w();
  std::vector<float> in(c.in.begin(), c.in.end()), bin(in.size());
  std::vector<float> w(c.w.begin(), c.w.end()), shift(c.b.begin(), c.b.end());
  std::vector<float> bres(residual.size()), out(c.dy.size());
  ToChannelBlocked(in.data(), g.in_channels, g.batch, in_p, block, bin.data());
  if (!residual.empty()) {
    ToChannelBlocked(residual.data(), g.out_channels, g.batch, out_p, block,
                     bres.data());
  }
  ws->channel_block = block;
  ws->weights_frozen = frozen;
  ConvForwardScaled(g, bin.data(), w.data(), scale.data(), shift.data(),
                    residual.empty() ? nullptr : bres.data(), /*relu=*/true,
                    out.data(), ws);
  std::vector<float> plain(out.size());
  FromChannelBlocked(out.data(), g.out_channels, g.batch, out_p, block,
                     plain.data());
  return plain;
}

// relu(conv * scale + shift + residual) from im2col's output in double,
// conv + b, [OC][N][OH][OW], taking b as the shift.
std::vector<double> ScaledWant(const ConvGeometry& g, const Case& c,
                               const std::vector<float>& scale,
                               const std::vector<float>& residual) {
  const int64_t per_channel = g.positions();
  std::vector<double> want(c.want.out.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const int64_t oc = i / per_channel;
    const double conv = c.want.out[i] - c.b[oc];
    const double sum = residual.empty() ? 0.0 : residual[i];
    want[i] = std::max(0.0, conv * scale[oc] + c.b[oc] + sum);
  }
  return want;
}

std::vector<float> Uniform(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = uniform(rng);
  return v;
}

TEST(ConvScaled, WinogradAndOnednnMatchTheDefinition) {
  // 3x3 stride 1 with 16 or more tiles (Winograd) and with fewer (oneDNN),
  // stride 2 and 1x1 (oneDNN); each evaluated twice on one workspace, once
  // as frozen weights (the second call reuses the transformed weights).
  for (const ConvGeometry& g :
       {Conv2(4, 16, 8, 24, 3, 1, 1), Conv2(1, 16, 8, 24, 3, 1, 1),
        Conv2(2, 16, 9, 8, 3, 2, 1), Conv2(2, 32, 6, 16, 1, 1, 0)}) {
    for (bool frozen : {false, true}) {
      SCOPED_TRACE(Describe(g) + (frozen ? " frozen" : ""));
      const Case c = MakeCase(g, 5);
      const std::vector<float> scale = Uniform(g.out_channels, 9);
      const std::vector<float> residual = Uniform(c.want.out.size(), 10);
      const std::vector<double> want = ScaledWant(g, c, scale, residual);
      ConvWorkspace<float> ws;
      for (int call = 0; call < 2; ++call) {
        EXPECT_TRUE(
            Close(RunScaled(g, 8, c, scale, residual, frozen, &ws), want))
            << "call " << call;
      }
    }
  }
}

// oneDNN's Winograd kernels, which it has for AVX-512 code on nChw16c only.
TEST(ConvOnednnWinograd, MatchesIm2colOnNChw16c) {
  if (NativeChannelBlock() != 16) GTEST_SKIP() << "oneDNN runs AVX2 code here";
  // Whole and partial 4x4 tiles, images smaller than one, one and two
  // blocks of 16 channels.
  for (const ConvGeometry& g :
       {Rect(2, 16, 8, 8, 16), Rect(3, 32, 5, 7, 16), Rect(1, 16, 1, 1, 32),
        Rect(2, 16, 13, 2, 16), Rect(4, 16, 16, 16, 32)}) {
    SCOPED_TRACE(Describe(g));
    const Case c = MakeCase(g, 13);
    ExpectClose(
        RunBlocked(g, 16, ConvAlgorithm::kWinograd, c.in, c.w, c.b, c.dy),
        c.want);
  }
  // kAuto with 32 whole tiles: the weight gradient alone on Winograd, the
  // other passes direct.
  const ConvGeometry g = Rect(32, 16, 4, 4, 16);
  SCOPED_TRACE(Describe(g));
  const Case c = MakeCase(g, 14);
  ExpectClose(RunBlocked(g, 16, ConvAlgorithm::kAuto, c.in, c.w, c.b, c.dy),
              c.want);
}

TEST(ConvOnednnWinograd, AutoTakesItWhereItPays) {
  if (NativeChannelBlock() != 16) GTEST_SKIP() << "oneDNN runs AVX2 code here";
  struct Want {
    ConvGeometry g;
    bool winograd;
  };
  // 64 tiles of 4x4 outputs, 8 (too few to pay), stride 2, 1x1.
  for (const Want& want : {Want{Conv2(4, 16, 16, 16, 3, 1, 1), true},
                           Want{Conv2(2, 16, 8, 16, 3, 1, 1), false},
                           Want{Conv2(4, 16, 16, 16, 3, 2, 1), false},
                           Want{Conv2(4, 16, 16, 16, 1, 1, 0), false}}) {
    const ConvGeometry& g = want.g;
    SCOPED_TRACE(Describe(g));
    const Case c = MakeCase(g, 17);
    ConvWorkspace<float> ws;
    ws.channel_block = 16;
    const std::vector<float> in(c.in.begin(), c.in.end()),
        w(c.w.begin(), c.w.end());
    std::vector<float> out(c.dy.size());
    ConvForward<float>(g, in.data(), w.data(), nullptr, out.data(), &ws);
    EXPECT_EQ(conv_internal::OnednnRanWinograd(ws.onednn_state), want.winograd);
  }
}

TEST(ConvOnednnWinograd, EvaluationMatchesTheDefinition) {
  if (NativeChannelBlock() != 16) GTEST_SKIP() << "oneDNN runs AVX2 code here";
  // Winograd, on frozen weights or not; with a residual sum, which oneDNN's
  // Winograd cannot fuse, the direct kernels.
  const ConvGeometry g = Conv2(3, 32, 16, 16, 3, 1, 1);
  for (bool frozen : {false, true}) {
    for (bool residual : {false, true}) {
      SCOPED_TRACE(std::string(frozen ? "frozen" : "not frozen") +
                   (residual ? ", residual" : ""));
      const Case c = MakeCase(g, 19);
      const std::vector<float> scale = Uniform(g.out_channels, 21);
      const std::vector<float> sum =
          residual ? Uniform(c.want.out.size(), 22) : std::vector<float>();
      const std::vector<double> want = ScaledWant(g, c, scale, sum);
      ConvWorkspace<float> ws;
      for (int call = 0; call < 2; ++call) {
        EXPECT_TRUE(Close(RunScaled(g, 16, c, scale, sum, frozen, &ws), want))
            << "call " << call;
        EXPECT_EQ(conv_internal::OnednnRanWinograd(ws.onednn_state), !residual);
      }
    }
  }
}

TEST(ConvOnednnWinograd, UnfrozenEvaluationFollowsEveryChangeOfWeights) {
  if (NativeChannelBlock() != 16) GTEST_SKIP() << "oneDNN runs AVX2 code here";
  // Batch 1 at 14x14 (49 tiles of 2x2): Winograd in evaluation. Unfrozen, its
  // transformed weights are kept between calls while weight * scale keeps
  // its bits; a new weight, a new scale, or the old weight back must each
  // give their own outputs.
  const ConvGeometry g = Conv2(1, 32, 14, 32, 3, 1, 1);
  const Case a = MakeCase(g, 31), b = MakeCase(g, 32);
  const std::vector<float> s1 = Uniform(g.out_channels, 33);
  const std::vector<float> s2 = Uniform(g.out_channels, 34);
  const struct {
    const Case* c;
    const std::vector<float>* scale;
  } calls[] = {{&a, &s1}, {&a, &s1}, {&b, &s1}, {&b, &s2}, {&a, &s1}};
  ConvWorkspace<float> ws;
  for (size_t i = 0; i < std::size(calls); ++i) {
    const Case& c = *calls[i].c;
    const std::vector<double> want = ScaledWant(g, c, *calls[i].scale, {});
    EXPECT_TRUE(
        Close(RunScaled(g, 16, c, *calls[i].scale, {}, false, &ws), want))
        << "call " << i;
    EXPECT_TRUE(conv_internal::OnednnRanWinograd(ws.onednn_state));
  }
}

// ConvBackward's two passes side by side on a team of two threads: each
// pass runs alone on its thread, so both gradients have the bits of a
// one-thread run, on batch-inner and channel-blocked activations, and one
// workspace may switch between running the passes in turn and side by side.

// A ResNet block's shapes: 3x3 at stride 1 and 2, a 1x1 projection, and
// two layers of ResNet-18 whose weight gradient oneDNN sums in another
// order on two threads than on one (so that a pass run on two threads
// would not give the bits checked).
std::vector<ConvGeometry> SideBySideShapes() {
  return {Conv2(8, 32, 8, 32, 3, 1, 1), Conv2(4, 32, 6, 64, 3, 2, 1),
          Conv2(4, 16, 6, 48, 1, 2, 0), Conv2(32, 64, 8, 64, 3, 1, 1),
          Conv2(16, 64, 16, 64, 3, 1, 1)};
}

struct Operands {
  std::vector<float> in, w, b, dy;
};

Operands RandomOperands(const ConvGeometry& g, uint64_t seed) {
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
void ForEachSideBySideCase(const Fn& fn) {
  for (const ConvGeometry& g : SideBySideShapes()) {
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
  ForEachSideBySideCase([](const ConvGeometry& g, const auto& make) {
    const Operands x = RandomOperands(g, 7);
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
  ForEachSideBySideCase([](const ConvGeometry& g, const auto& make) {
    const Operands x = RandomOperands(g, 11);
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
  ForEachSideBySideCase([](const ConvGeometry& g, const auto& make) {
    const Operands x = RandomOperands(g, 13);
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

// Convolutions whose weight gradients a BackwardHelper runs: three layers
// of one shape (oneDNN's primitive cache gives them one primitive, which
// then runs on both threads, possibly at once) on oneDNN, and a tiny map
// on the live-tap products. Each gradient has the bits of a one-thread run,
// whichever thread ran it.
TEST(ConvBackwardHanded, LayersOfOneShapeGiveTheBitsOfOneThread) {
  const int64_t block = NativeChannelBlock();
  if (block == 0) GTEST_SKIP() << "no channel-blocked layout on this machine";
  for (const ConvGeometry& g :
       {Conv2(32, 64, 8, 64, 3, 1, 1), Conv2(16, 64, 2, 128, 3, 1, 1),
        Conv2(8, 32, 1, 32, 3, 1, 1)}) {
    SCOPED_TRACE("OC " + std::to_string(g.out_channels) + " at " +
                 std::to_string(g.in_h));
    constexpr int kLayers = 3;
    std::vector<Operands> x;
    std::vector<Gradients> want, got;
    std::vector<ConvWorkspace<float>> ws(kLayers);
    for (int l = 0; l < kLayers; ++l) {
      x.push_back(RandomOperands(g, 20 + l));
      ConvWorkspace<float> one;
      one.channel_block = block;
      want.push_back(Backward(g, x[l], 1, SideBySide::kNever, &one));
      got.push_back({std::vector<float>(x[l].w.size(), -99.0f),
                     std::vector<float>(x[l].b.size(), -99.0f),
                     std::vector<float>(x[l].in.size(), -99.0f)});
      ws[l].channel_block = block;
      std::vector<float> out(x[l].dy.size());
      ConvForward<float>(g, x[l].in.data(), x[l].w.data(), x[l].b.data(),
                         out.data(), &ws[l]);
    }
    SetOnednnThreads(2);
    const bool ran = BackwardHelper::Run([&](BackwardHelper& helper) {
      for (int l = kLayers; l-- > 0;) {
        ConvBackward<float>(g, x[l].dy.data(), x[l].w.data(), got[l].w.data(),
                            got[l].b.data(),
                            l == 0 ? nullptr : got[l].in.data(), &ws[l]);
      }
      EXPECT_EQ(helper.pushed(), kLayers);
    });
    SetOnednnThreads(0);
    ASSERT_TRUE(ran);
    for (int l = 0; l < kLayers; ++l) {
      if (l == 0) got[l].in = want[l].in;  // not asked for
      ExpectSameBits(got[l], want[l], "layer " + std::to_string(l));
    }
  }
}

}  // namespace
}  // namespace cohort

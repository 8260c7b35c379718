#include "kernels/conv.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/onednn_threads.h"

namespace cohort {
namespace {

// Direct loops in double: the reference every algorithm is checked against.
struct Reference {
  std::vector<double> out, grad_w, grad_b, grad_in;
};

Reference Naive(const ConvGeometry& g, const std::vector<double>& in,
                const std::vector<double>& w, const std::vector<double>& b,
                const std::vector<double>& grad_out) {
  const int64_t oh = g.out_h(), ow = g.out_w();
  Reference r;
  r.out.assign(g.out_channels * g.batch * oh * ow, 0.0);
  r.grad_w.assign(w.size(), 0.0);
  r.grad_b.assign(g.out_channels, 0.0);
  r.grad_in.assign(in.size(), 0.0);
  for (int64_t oc = 0; oc < g.out_channels; ++oc) {
    for (int64_t n = 0; n < g.batch; ++n) {
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t x = 0; x < ow; ++x) {
          const int64_t o = ((oc * g.batch + n) * oh + y) * ow + x;
          double s = b[oc];
          r.grad_b[oc] += grad_out[o];
          // Groups: output channel oc sees input channels of its group.
          const int64_t cg = g.in_channels / g.groups;
          const int64_t c0 = oc / (g.out_channels / g.groups) * cg;
          for (int64_t c = c0; c < c0 + cg; ++c) {
            for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
              for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
                const int64_t ih = y * g.stride + kh * g.dilation - g.pad_h;
                const int64_t iw = x * g.stride + kw * g.dilation - g.pad_w;
                if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) continue;
                const int64_t i =
                    ((c * g.batch + n) * g.in_h + ih) * g.in_w + iw;
                const int64_t k =
                    ((oc * cg + c - c0) * g.kernel_h + kh) * g.kernel_w + kw;
                s += w[k] * in[i];
                r.grad_w[k] += grad_out[o] * in[i];
                r.grad_in[i] += grad_out[o] * w[k];
              }
            }
          }
          r.out[o] = s;
        }
      }
    }
  }
  return r;
}

std::vector<double> Random(int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = normal(rng);
  return v;
}

template <typename T>
std::vector<T> Cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// max |got - want| <= rtol * max |want|, naming the first bad index.
template <typename T>
::testing::AssertionResult Close(const std::vector<T>& got,
                                 const std::vector<double>& want, double rtol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "size " << got.size() << " vs " << want.size();
  }
  double scale = 1e-30;
  for (double x : want) scale = std::max(scale, std::abs(x));
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= rtol * scale)) {
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
         "x" + std::to_string(g.kernel_w) + " s" + std::to_string(g.stride) +
         " p" + std::to_string(g.pad_h) + "," + std::to_string(g.pad_w) + " g" +
         std::to_string(g.groups) + " d" + std::to_string(g.dilation);
}

// Runs forward and both backward passes with scalar type T and checks all
// four results against the double reference.
template <typename T>
void CheckAgainstReference(const ConvGeometry& g, ConvAlgorithm algorithm,
                           double rtol, ConvWorkspace<T>* ws,
                           uint64_t seed = 7) {
  SCOPED_TRACE(Describe(g));
  std::mt19937_64 rng(seed);
  const auto in = Random(g.in_channels * g.batch * g.in_h * g.in_w, rng);
  const auto w = Random(g.out_channels * g.patch(), rng);
  const auto b = Random(g.out_channels, rng);
  const auto grad_out = Random(g.out_channels * g.positions(), rng);
  const Reference ref = Naive(g, in, w, b, grad_out);

  const auto tin = Cast<T>(in), tw = Cast<T>(w), tb = Cast<T>(b);
  const auto tgo = Cast<T>(grad_out);
  std::vector<T> out(ref.out.size(), T(-99)), gw(w.size(), T(-99)),
      gb(b.size(), T(-99)), gi(in.size(), T(-99));
  ws->algorithm = algorithm;
  ConvForward<T>(g, tin.data(), tw.data(), tb.data(), out.data(), ws);
  ConvBackwardWeights<T>(g, tgo.data(), gw.data(), gb.data(), ws);
  ConvBackwardInput<T>(g, tgo.data(), tw.data(), gi.data(), ws);
  EXPECT_TRUE(Close(out, ref.out, rtol)) << "forward";
  EXPECT_TRUE(Close(gw, ref.grad_w, rtol)) << "weight gradient";
  EXPECT_TRUE(Close(gb, ref.grad_b, rtol)) << "bias gradient";
  EXPECT_TRUE(Close(gi, ref.grad_in, rtol)) << "input gradient";
}

ConvGeometry Conv2(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc,
                   int64_t k, int64_t s, int64_t p) {
  ConvGeometry g;
  g.batch = n;
  g.in_channels = c;
  g.in_h = h;
  g.in_w = w;
  g.out_channels = oc;
  g.kernel_h = g.kernel_w = k;
  g.stride = s;
  g.pad_h = g.pad_w = p;
  return g;
}

ConvGeometry Conv1(int64_t n, int64_t c, int64_t l, int64_t oc, int64_t k,
                   int64_t s, int64_t p) {
  ConvGeometry g = Conv2(n, c, 1, l, oc, k, s, 0);
  g.kernel_h = 1;
  g.pad_w = p;
  return g;
}

// Shapes that reach every code path of the grid kernels: each tile shape
// (6x2, 4x3, 3x4) with partial channel blocks, tap remainders of the
// gradient blocks, spans shorter than a tile (narrow tiles) or a vector
// (scalar path), one output row (direct writes), chunks that split a
// sample, and several samples per gradient group.
std::vector<ConvGeometry> Stride1Shapes() {
  return {
      Conv2(2, 3, 12, 12, 6, 5, 1, 0), Conv2(3, 6, 14, 14, 16, 5, 1, 0),
      Conv2(2, 1, 9, 9, 6, 5, 1, 2),   Conv2(1, 2, 7, 10, 7, 3, 1, 1),
      Conv2(2, 4, 5, 5, 5, 3, 1, 0),   Conv2(2, 2, 4, 4, 3, 2, 1, 1),
      Conv2(1, 3, 6, 6, 13, 1, 1, 0),  Conv2(2, 5, 8, 8, 11, 4, 1, 3),
      Conv1(2, 3, 50, 16, 3, 1, 1),    Conv1(3, 16, 40, 32, 3, 1, 1),
      Conv1(2, 32, 37, 3, 3, 1, 1),    Conv1(1, 2, 1500, 4, 5, 1, 2),
      Conv1(1, 3, 3000, 1, 3, 1, 0),   Conv2(3, 1, 33, 70, 2, 5, 1, 2),
  };
}

TEST(ConvForward, MatchesHandComputedValues) {
  // One 3x3 input, one 2x2 filter, bias 0.5, two samples batch-inner.
  ConvGeometry g = Conv2(2, 1, 3, 3, 1, 2, 1, 0);
  const std::vector<float> in = {1, 2, 3, 4, 5, 6, 7, 8, 9,   // sample 0
                                 0, 0, 0, 0, 1, 0, 0, 0, 0};  // sample 1
  const std::vector<float> w = {1, 0, -1, 2}, b = {0.5f};
  std::vector<float> out(8);
  ConvWorkspace<float> ws;
  ConvForward<float>(g, in.data(), w.data(), b.data(), out.data(), &ws);
  // out = x[y][x] - x[y+1][x] + 2 x[y+1][x+1] + 0.5 at each 2x2 window,
  // e.g. 1 - 4 + 2 * 5 + 0.5 = 7.5 at the top left of sample 0.
  const std::vector<float> want = {7.5f, 9.5f,  13.5f, 15.5f,
                                   2.5f, -0.5f, 0.5f,  1.5f};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(out[i], want[i]) << i;
}

TEST(ConvGrid, FloatMatchesDoubleReferenceOnStride1Shapes) {
  ConvWorkspace<float> ws;  // reused across shapes on purpose
  for (const ConvGeometry& g : Stride1Shapes()) {
    CheckAgainstReference<float>(g, ConvAlgorithm::kAuto, 2e-5, &ws);
  }
}

// Every alternative kernel kAuto chooses between: position-vectorized grid
// (forward, weight and input gradient), channel-vectorized forward and
// weight gradient, column input gradient.
TEST(ConvGrid, EveryKernelMatchesReference) {
  ConvWorkspace<float> ws;
  for (const ConvGeometry& g : Stride1Shapes()) {
    CheckAgainstReference<float>(g, ConvAlgorithm::kGrid, 2e-5, &ws);
    CheckAgainstReference<float>(g, ConvAlgorithm::kChannels, 2e-5, &ws);
  }
}

TEST(ConvIm2col, FloatMatchesDoubleReferenceOnStride1Shapes) {
  ConvWorkspace<float> ws;
  for (const ConvGeometry& g : Stride1Shapes()) {
    CheckAgainstReference<float>(g, ConvAlgorithm::kIm2col, 2e-5, &ws);
  }
}

TEST(ConvIm2col, MatchesReferenceWithStrideAndLargePadding) {
  const std::vector<ConvGeometry> shapes = {
      Conv2(2, 3, 9, 9, 4, 3, 2, 0),
      Conv2(2, 2, 8, 7, 5, 5, 2, 2),
      Conv2(1, 2, 5, 5, 3, 3, 3, 1),
      Conv1(2, 3, 21, 4, 3, 2, 1),
      // Padding >= kernel: the grid's input gradient does not apply.
      Conv2(2, 2, 4, 4, 3, 2, 1, 2),
  };
  ConvWorkspace<float> wsf;
  ConvWorkspace<double> wsd;
  for (const ConvGeometry& g : shapes) {
    CheckAgainstReference<float>(g, ConvAlgorithm::kAuto, 2e-5, &wsf);
    CheckAgainstReference<double>(g, ConvAlgorithm::kAuto, 1e-12, &wsd);
  }
}

TEST(ConvIm2col, DoubleMatchesReferenceOnStride1Shapes) {
  ConvWorkspace<double> ws;
  for (const ConvGeometry& g : Stride1Shapes()) {
    CheckAgainstReference<double>(g, ConvAlgorithm::kAuto, 1e-12, &ws);
  }
}

TEST(ConvGrid, BenchmarkModelShapes) {
  ConvWorkspace<float> ws;
  CheckAgainstReference<float>(Conv2(4, 3, 32, 32, 6, 5, 1, 0),
                               ConvAlgorithm::kAuto, 2e-5, &ws);
  CheckAgainstReference<float>(Conv2(4, 1, 28, 28, 6, 5, 1, 2),
                               ConvAlgorithm::kAuto, 2e-5, &ws);
}

TEST(ConvGrid, RepeatedCallsGiveIdenticalResults) {
  // Scratch reuse must not leak state from one call into the next.
  ConvGeometry g = Conv2(3, 4, 10, 10, 7, 3, 1, 1);
  ConvWorkspace<float> ws;
  CheckAgainstReference<float>(g, ConvAlgorithm::kAuto, 2e-5, &ws, 1);
  CheckAgainstReference<float>(Conv1(2, 3, 100, 5, 3, 1, 1),
                               ConvAlgorithm::kAuto, 2e-5, &ws, 2);
  CheckAgainstReference<float>(g, ConvAlgorithm::kAuto, 2e-5, &ws, 3);
}

ConvGeometry With(ConvGeometry g, int64_t groups, int64_t dilation) {
  g.groups = groups;
  g.dilation = dilation;
  return g;
}

// Depthwise (multiplier 1 and 2), grouped and dilated shapes, every stride
// the direct depthwise kernels treat differently, 1-D and 2-D.
std::vector<ConvGeometry> GroupedShapes() {
  return {
      With(Conv2(3, 8, 10, 10, 8, 3, 1, 1), 8, 1),  // depthwise 3x3
      With(Conv2(2, 4, 9, 7, 8, 3, 2, 1), 4, 1),    // multiplier 2, s2
      With(Conv2(130, 3, 4, 4, 3, 3, 1, 1), 3, 1),  // several blocks
      With(Conv2(2, 5, 11, 11, 5, 5, 2, 2), 5, 2),  // dilated depthwise
      With(Conv2(2, 6, 8, 8, 4, 3, 1, 1), 2, 1),    // 2 groups
      With(Conv2(2, 6, 9, 9, 9, 3, 2, 0), 3, 1),    // 3 groups, s2
      With(Conv2(2, 3, 12, 12, 4, 3, 1, 2), 1, 2),  // dilated
      With(Conv2(1, 4, 13, 13, 8, 3, 3, 3), 2, 3),  // grouped, dilated
      // 3x3 depthwise on planes 32 and wider (the row kernels): odd and
      // even widths, stride 2, multiplier 2 (its input gradient on the grid).
      With(Conv2(2, 3, 5, 33, 3, 3, 1, 1), 3, 1),
      With(Conv2(2, 3, 6, 34, 3, 3, 2, 1), 3, 1),
      With(Conv2(1, 2, 7, 35, 4, 3, 2, 1), 2, 1),
      With(Conv2(1, 2, 4, 32, 4, 3, 1, 1), 2, 1),
      // Stride 2 on the row kernels: odd and even heights and widths,
      // the input gradient's last row and column reading one output.
      With(Conv2(2, 3, 7, 35, 3, 3, 2, 1), 3, 1),
      With(Conv2(3, 2, 8, 32, 2, 3, 2, 1), 2, 1),
      With(Conv2(1, 2, 1, 33, 2, 3, 2, 1), 2, 1),
      With(Conv1(2, 6, 30, 6, 3, 1, 1), 6, 1),  // 1-D depthwise
      With(Conv1(2, 4, 25, 6, 3, 2, 2), 2, 2),  // 1-D grouped dilated
  };
}

TEST(ConvGroups, MatchReferenceForEveryAlgorithmAndType) {
  ConvWorkspace<float> wsf;
  ConvWorkspace<double> wsd;
  for (const ConvGeometry& g : GroupedShapes()) {
    for (ConvAlgorithm a :
         {ConvAlgorithm::kAuto, ConvAlgorithm::kIm2col, ConvAlgorithm::kGrid}) {
      CheckAgainstReference<float>(g, a, 2e-5, &wsf);
    }
    CheckAgainstReference<double>(g, ConvAlgorithm::kAuto, 1e-12, &wsd);
  }
}

TEST(ConvGroups, OutputSizeCountsTheDilatedKernel) {
  // 11 + 2*2 - (2*(5-1)+1) = 6 -> 6/2 + 1 = 4 (torch:
  // floor((L+2p-d(k-1)-1)/s)+1).
  const ConvGeometry g = With(Conv2(1, 5, 11, 11, 5, 5, 2, 2), 5, 2);
  EXPECT_EQ(g.out_h(), 4);
  EXPECT_EQ(g.patch(), 25);
  EXPECT_TRUE(g.depthwise());
  EXPECT_FALSE(With(Conv2(1, 6, 8, 8, 4, 3, 1, 1), 2, 1).depthwise());
}

// Depthwise channels go to the compute threads; every bit stays the same.
std::vector<float> DepthwiseOnThreads(int threads, const ConvGeometry& g) {
  SetOnednnThreads(threads);
  std::vector<float> in(g.in_channels * g.batch * g.in_h * g.in_w),
      w(g.out_channels * g.patch()), b(g.out_channels),
      dy(g.out_channels * g.positions());
  int64_t k = 0;
  for (auto* v : {&in, &w, &b, &dy}) {
    for (float& x : *v)
      x = static_cast<float>((k++ * 7919) % 1013) * 0.002f - 1;
  }
  std::vector<float> out(dy.size()), gw(w.size()), gb(b.size()), gi(in.size());
  ConvWorkspace<float> ws;
  ConvForward<float>(g, in.data(), w.data(), b.data(), out.data(), &ws);
  ConvBackwardWeights<float>(g, dy.data(), gw.data(), gb.data(), &ws);
  ConvBackwardInput<float>(g, dy.data(), w.data(), gi.data(), &ws);
  SetOnednnThreads(0);
  for (auto* v : {&gw, &gb, &gi}) out.insert(out.end(), v->begin(), v->end());
  return out;
}

TEST(ConvDepthwise, SameBitsOnOneAndTwoThreads) {
  // MobileNetV2's 3x3 depthwise shapes in small: stride 1 and 2, and a
  // multiplier of 2, on the grid and (40 wide) on the row kernels.
  for (const ConvGeometry& g :
       {With(Conv2(4, 96, 28, 28, 96, 3, 1, 1), 96, 1),
        With(Conv2(4, 64, 27, 27, 64, 3, 2, 1), 64, 1),
        With(Conv2(2, 48, 20, 20, 96, 3, 1, 1), 48, 1),
        With(Conv2(2, 32, 9, 40, 32, 3, 1, 1), 32, 1),
        With(Conv2(2, 32, 9, 41, 32, 3, 2, 1), 32, 1),
        With(Conv2(2, 32, 10, 40, 32, 3, 2, 1), 32, 1)}) {
    EXPECT_EQ(DepthwiseOnThreads(1, g), DepthwiseOnThreads(2, g))
        << g.in_channels << " channels at " << g.in_h;
  }
}

}  // namespace
}  // namespace cohort

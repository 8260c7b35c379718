// The batch-norm kernels with a fused ReLU or ReLU6 against the same kernels
// without one and the separate activation kernels in turn, bit for bit:
// the normalized output, the parameter gradients' sums and the input
// gradient, in the batch-inner layout (rows with vector tails) and the dense
// one, float and double. One channel maps x to itself, so that the
// activations' edges (0, -0, 6, NaN) reach them exactly.
#include "kernels/batchnorm.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/activations.h"
#include "kernels/bit_difference.h"
#include "kernels/elementwise.h"

namespace cohort {
namespace {

// The separate activation layer's forward and backward kernels.
template <typename T>
void SeparateForward(FusedActivation act, const std::vector<T>& in,
                     std::vector<T>* out) {
  if (act == FusedActivation::kRelu) {
    ReluForward(in.data(), out->data(), in.size());
  } else {
    ActivationForward(ActivationKind::kRelu6, T(0), in.data(), out->data(),
                      in.size());
  }
}

template <typename T>
void SeparateBackward(FusedActivation act, const std::vector<T>& in,
                      const std::vector<T>& dy, std::vector<T>* g) {
  if (act == FusedActivation::kRelu) {
    ReluBackward(in.data(), dy.data(), g->data(), in.size());
  } else {
    ActivationBackward(ActivationKind::kRelu6, T(0), in.data(), dy.data(),
                       g->data(), in.size());
  }
}

template <typename T>
struct Case {
  ChannelLayout l;
  std::vector<T> x, dy, mean, scale, shift, a, b, d;

  explicit Case(ChannelLayout layout) : l(layout) {
    std::mt19937_64 rng(l.outer * 1009 + l.channels * 31 + l.inner);
    std::normal_distribution<double> normal(0, 1);
    const int64_t n = l.outer * l.channels * l.inner;
    for (int64_t i = 0; i < n; ++i) {
      x.push_back(static_cast<T>(3 + 4 * normal(rng)));
      dy.push_back(static_cast<T>(normal(rng)));
    }
    for (int64_t c = 0; c < l.channels; ++c) {
      mean.push_back(static_cast<T>(normal(rng)));
      scale.push_back(static_cast<T>(1 + 0.5 * normal(rng)));
      shift.push_back(static_cast<T>(normal(rng)));
      a.push_back(static_cast<T>(normal(rng)));
      b.push_back(static_cast<T>(normal(rng)));
      d.push_back(static_cast<T>(normal(rng)));
    }
    // Channel 0 is the identity, and its first elements the edges.
    mean[0] = T(0), scale[0] = T(1), shift[0] = T(0);
    const T edges[] = {T(0),
                       T(-0.0),
                       T(6),
                       std::nextafter(T(6), T(7)),
                       std::nextafter(T(6), T(5)),
                       std::numeric_limits<T>::denorm_min(),
                       std::numeric_limits<T>::quiet_NaN(),
                       T(-1)};
    const int64_t step = l.inner == 1 ? l.channels : 1;
    for (int64_t k = 0; k < 8 && k * step < n; ++k) x[k * step] = edges[k];
  }
};

template <typename T>
void ExpectFusedEqualsSeparate(ChannelLayout l, FusedActivation act) {
  SCOPED_TRACE(testing::Message()
               << "layout " << l.outer << "x" << l.channels << "x" << l.inner
               << ", activation " << static_cast<int>(act));
  Case<T> k(l);
  const size_t n = k.x.size();
  std::vector<T> pre(n), want(n), got(n);
  ChannelNormalize(l, k.x.data(), k.mean.data(), k.scale.data(), k.shift.data(),
                   FusedActivation::kNone, pre.data());
  SeparateForward(act, pre, &want);
  ChannelNormalize(l, k.x.data(), k.mean.data(), k.scale.data(), k.shift.data(),
                   act, got.data());
  EXPECT_EQ(FirstBitDifference(got, want), -1) << "forward";

  std::vector<T> g(n);
  SeparateBackward(act, pre, k.dy, &g);
  const size_t c_n = l.channels;
  std::vector<double> s_want(c_n), q_want(c_n), s_got(c_n), q_got(c_n);
  ChannelGradSums(l, g.data(), k.x.data(), ActivationInput<T>{},
                  FusedActivation::kNone, k.mean.data(), s_want.data(),
                  q_want.data());
  const ActivationInput<T> z{k.scale.data(), k.shift.data()};
  ChannelGradSums(l, k.dy.data(), k.x.data(), z, act, k.mean.data(),
                  s_got.data(), q_got.data());
  EXPECT_EQ(FirstBitDifference(s_got, s_want), -1) << "sum of dy";
  EXPECT_EQ(FirstBitDifference(q_got, q_want), -1) << "sum of dy * (x - mean)";

  std::vector<T> dx_want(n), dx_got(n);
  ChannelInputGrad(l, g.data(), k.x.data(), ActivationInput<T>{},
                   FusedActivation::kNone, k.mean.data(), k.a.data(),
                   k.b.data(), k.d.data(), dx_want.data());
  ChannelInputGrad(l, k.dy.data(), k.x.data(), z, act, k.mean.data(),
                   k.a.data(), k.b.data(), k.d.data(), dx_got.data());
  EXPECT_EQ(FirstBitDifference(dx_got, dx_want), -1) << "input gradient";
}

template <typename T>
void ExpectAllLayouts() {
  // Batch-inner rows of 16 (whole vectors), 37 and 100 (tails); dense.
  const ChannelLayout layouts[] = {{1, 3, 16}, {1, 4, 37}, {1, 2, 100},
                                   {2, 3, 37}, {9, 5, 1},  {64, 17, 1}};
  for (const ChannelLayout& l : layouts) {
    for (FusedActivation act :
         {FusedActivation::kRelu, FusedActivation::kRelu6}) {
      ExpectFusedEqualsSeparate<T>(l, act);
    }
  }
}

TEST(BatchNormKernels, FloatFusedActivationGivesTheBitsOfTheSeparateSteps) {
  ExpectAllLayouts<float>();
}

TEST(BatchNormKernels, DoubleFusedActivationGivesTheBitsOfTheSeparateSteps) {
  ExpectAllLayouts<double>();
}

// The fused forward pass keeps working in place, as the plain one does.
TEST(BatchNormKernels, FusedNormalizeRunsInPlace) {
  Case<float> k({1, 4, 37});
  std::vector<float> want(k.x.size());
  ChannelNormalize(k.l, k.x.data(), k.mean.data(), k.scale.data(),
                   k.shift.data(), FusedActivation::kRelu6, want.data());
  std::vector<float> y = k.x;
  ChannelNormalize(k.l, y.data(), k.mean.data(), k.scale.data(), k.shift.data(),
                   FusedActivation::kRelu6, y.data());
  EXPECT_EQ(FirstBitDifference(y, want), -1);
}

}  // namespace
}  // namespace cohort

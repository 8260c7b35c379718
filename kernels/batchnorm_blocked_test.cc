// The blocked kernels against kernels/batchnorm.h's on the same data copied
// to the batch-inner layout {C, N * P}: every output, over the whole channel
// range and over an inner range of blocks (whose neighbours must stay
// untouched), for B = 4, 8 and 16, float and double. The backward kernels'
// ReLU mask is checked against the same kernels unmasked on a dy zeroed by
// hand. The fused sum with the shortcut is checked bit for bit against
// the separate steps.
#include "kernels/batchnorm_blocked.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/batchnorm.h"
#include "kernels/bit_difference.h"
#include "kernels/elementwise.h"

namespace cohort {
namespace {

// Written before each call; a channel outside the range must keep it.
constexpr double kUntouched = -12345.0;

// Tolerance of an output whose terms have absolute values summing to
// `magnitude`: T's outputs are rounded in T, the sums are doubles.
template <typename T>
double Tolerance(double magnitude) {
  return std::is_same_v<T, float> ? 1e-5 * magnitude + 1e-6
                                  : 1e-12 * magnitude + 1e-12;
}
double SumTolerance(double magnitude) { return 1e-12 * magnitude + 1e-12; }

int64_t BlockedIndex(const BlockedLayout& l, int64_t n, int64_t c, int64_t p) {
  return ((n * (l.channels / l.block) + c / l.block) * l.spatial + p) *
             l.block +
         c % l.block;
}

// Index of (n, c, p) in the batch-inner layout {C, N * P}.
int64_t ChannelIndex(const BlockedLayout& l, int64_t n, int64_t c, int64_t p) {
  return c * l.count() + n * l.spatial + p;
}

template <typename T>
std::vector<T> ToChannelMajor(const BlockedLayout& l, const std::vector<T>& v) {
  std::vector<T> out(v.size());
  for (int64_t n = 0; n < l.batch; ++n) {
    for (int64_t c = 0; c < l.channels; ++c) {
      for (int64_t p = 0; p < l.spatial; ++p) {
        out[ChannelIndex(l, n, c, p)] = v[BlockedIndex(l, n, c, p)];
      }
    }
  }
  return out;
}

// One shape's inputs in both layouts, and the reference kernels' outputs.
template <typename T>
struct Case {
  BlockedLayout l;
  ChannelLayout cl;
  std::vector<T> x, dy;    // blocked
  std::vector<T> xi, dyi;  // batch-inner
  std::vector<T> mean, scale, shift, a, b, d;
  std::vector<double> ref_mean, ref_var, ref_sum_dy, ref_sum_dy_xc;

  Case(int64_t batch, int64_t channels, int64_t spatial, int64_t block) {
    l = {batch, channels, spatial, block};
    cl = {1, channels, l.count()};
    std::mt19937_64 rng(channels * 131 + spatial * 7 + block);
    std::normal_distribution<double> normal(0, 1);
    std::uniform_real_distribution<double> uniform(-2, 2);
    x.resize(batch * channels * spatial);
    dy.resize(x.size());
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t c = 0; c < channels; ++c) {
        // Every third channel sits far from zero, where an unshifted
        // one-pass variance would lose its digits.
        const double offset = c % 3 == 0 ? 1000.0 + c : 0.25 * c;
        const double spread = 1.0 + 0.5 * (c % 4);
        for (int64_t p = 0; p < spatial; ++p) {
          const int64_t i = BlockedIndex(l, n, c, p);
          x[i] = static_cast<T>(offset + spread * normal(rng));
          dy[i] = static_cast<T>(normal(rng));
        }
      }
    }
    xi = ToChannelMajor(l, x);
    dyi = ToChannelMajor(l, dy);
    for (auto* v : {&scale, &shift, &a, &b, &d}) {
      v->resize(channels);
      for (T& e : *v) e = static_cast<T>(uniform(rng));
    }
    ref_mean.resize(channels);
    ref_var.resize(channels);
    ChannelMeanVar(cl, xi.data(), ref_mean.data(), ref_var.data());
    mean.assign(ref_mean.begin(), ref_mean.end());
    ref_sum_dy.resize(channels);
    ref_sum_dy_xc.resize(channels);
    ChannelGradSums(cl, dyi.data(), xi.data(), ActivationInput<T>{},
                    FusedActivation::kNone, mean.data(), ref_sum_dy.data(),
                    ref_sum_dy_xc.data());
  }

  // Calls f(c, i) for every batch-inner index i of channels [c0, c1).
  template <typename F>
  void ForEachElement(int64_t c0, int64_t c1, F f) const {
    for (int64_t c = c0; c < c1; ++c) {
      for (int64_t i = c * l.count(); i < (c + 1) * l.count(); ++i) f(c, i);
    }
  }
};

// The ranges each case runs over: all channels, and where there are at
// least two blocks, an inner range that leaves a block out on a side.
std::vector<std::pair<int64_t, int64_t>> Ranges(const BlockedLayout& l) {
  std::vector<std::pair<int64_t, int64_t>> r = {{0, l.channels}};
  const int64_t blocks = l.channels / l.block;
  if (blocks >= 3) r.push_back({l.block, l.channels - l.block});
  if (blocks == 2) r.push_back({l.block, l.channels});
  return r;
}

bool Inside(int64_t c, int64_t c0, int64_t c1) { return c >= c0 && c < c1; }

template <typename T>
void CheckMeanVar(const Case<T>& k, int64_t c0, int64_t c1) {
  std::vector<double> mean(k.l.channels, kUntouched);
  std::vector<double> var(k.l.channels, kUntouched);
  BlockedMeanVar(k.l, k.x.data(), c0, c1, mean.data(), var.data());
  for (int64_t c = 0; c < k.l.channels; ++c) {
    if (!Inside(c, c0, c1)) {
      EXPECT_EQ(mean[c], kUntouched) << c;
      EXPECT_EQ(var[c], kUntouched) << c;
      continue;
    }
    EXPECT_NEAR(mean[c], k.ref_mean[c], SumTolerance(std::abs(k.ref_mean[c])))
        << c;
    EXPECT_NEAR(var[c], k.ref_var[c], SumTolerance(k.ref_var[c])) << c;
  }
}

template <typename T>
void CheckNormalize(const Case<T>& k, int64_t c0, int64_t c1, bool relu) {
  std::vector<T> y(k.x.size(), static_cast<T>(kUntouched));
  BlockedNormalize(k.l, k.x.data(), c0, c1, k.mean.data(), k.scale.data(),
                   k.shift.data(), relu, y.data());
  const std::vector<T> yi = ToChannelMajor(k.l, y);
  std::vector<T> want(k.xi.size());
  ChannelNormalize(k.cl, k.xi.data(), k.mean.data(), k.scale.data(),
                   k.shift.data(), FusedActivation::kNone, want.data());
  k.ForEachElement(0, k.l.channels, [&](int64_t c, int64_t i) {
    if (!Inside(c, c0, c1)) {
      EXPECT_EQ(yi[i], static_cast<T>(kUntouched)) << c << " " << i;
      return;
    }
    const T w = relu ? std::max(want[i], T(0)) : want[i];
    const double terms = std::abs(double(k.xi[i] - k.mean[c]) * k.scale[c]) +
                         std::abs(double(k.shift[c]));
    EXPECT_NEAR(yi[i], w, Tolerance<T>(terms)) << c << " " << i;
  });
}

template <typename T>
void CheckGradSums(const Case<T>& k, int64_t c0, int64_t c1) {
  std::vector<double> sum_dy(k.l.channels, kUntouched);
  std::vector<double> sum_dy_xc(k.l.channels, kUntouched);
  BlockedGradSums(k.l, k.dy.data(), k.x.data(), {}, c0, c1, k.mean.data(),
                  sum_dy.data(), sum_dy_xc.data());
  std::vector<double> abs_dy(k.l.channels), abs_dy_xc(k.l.channels);
  k.ForEachElement(0, k.l.channels, [&](int64_t c, int64_t i) {
    abs_dy[c] += std::abs(double(k.dyi[i]));
    abs_dy_xc[c] += std::abs(double(k.dyi[i]) * double(k.xi[i] - k.mean[c]));
  });
  for (int64_t c = 0; c < k.l.channels; ++c) {
    if (!Inside(c, c0, c1)) {
      EXPECT_EQ(sum_dy[c], kUntouched) << c;
      EXPECT_EQ(sum_dy_xc[c], kUntouched) << c;
      continue;
    }
    EXPECT_NEAR(sum_dy[c], k.ref_sum_dy[c], SumTolerance(abs_dy[c])) << c;
    EXPECT_NEAR(sum_dy_xc[c], k.ref_sum_dy_xc[c], SumTolerance(abs_dy_xc[c]))
        << c;
  }
}

template <typename T>
void CheckInputGrad(const Case<T>& k, int64_t c0, int64_t c1) {
  std::vector<T> dx(k.x.size(), static_cast<T>(kUntouched));
  BlockedInputGrad(k.l, k.dy.data(), k.x.data(), {}, c0, c1, k.mean.data(),
                   k.a.data(), k.b.data(), k.d.data(), dx.data());
  const std::vector<T> dxi = ToChannelMajor(k.l, dx);
  std::vector<T> want(k.xi.size());
  ChannelInputGrad(k.cl, k.dyi.data(), k.xi.data(), ActivationInput<T>{},
                   FusedActivation::kNone, k.mean.data(), k.a.data(),
                   k.b.data(), k.d.data(), want.data());
  k.ForEachElement(0, k.l.channels, [&](int64_t c, int64_t i) {
    if (!Inside(c, c0, c1)) {
      EXPECT_EQ(dxi[i], static_cast<T>(kUntouched)) << c << " " << i;
      return;
    }
    const double terms = std::abs(double(k.a[c]) * k.dyi[i]) +
                         std::abs(double(k.b[c]) * (k.xi[i] - k.mean[c])) +
                         std::abs(double(k.d[c]));
    EXPECT_NEAR(dxi[i], want[i], Tolerance<T>(terms)) << c << " " << i;
  });
}

// y == x and dx == dy give the out-of-place results bit for bit.
template <typename T>
void CheckInPlace(const Case<T>& k) {
  const int64_t c_n = k.l.channels;
  for (bool relu : {false, true}) {
    std::vector<T> y(k.x.size()), in_place = k.x;
    BlockedNormalize(k.l, k.x.data(), 0, c_n, k.mean.data(), k.scale.data(),
                     k.shift.data(), relu, y.data());
    BlockedNormalize(k.l, in_place.data(), 0, c_n, k.mean.data(),
                     k.scale.data(), k.shift.data(), relu, in_place.data());
    EXPECT_EQ(in_place, y) << "relu " << relu;
  }
  std::vector<T> dx(k.x.size()), in_place = k.dy;
  BlockedInputGrad(k.l, k.dy.data(), k.x.data(), {}, 0, c_n, k.mean.data(),
                   k.a.data(), k.b.data(), k.d.data(), dx.data());
  BlockedInputGrad(k.l, in_place.data(), k.x.data(), {}, 0, c_n, k.mean.data(),
                   k.a.data(), k.b.data(), k.d.data(), in_place.data());
  EXPECT_EQ(in_place, dx);
}

// The masked backward kernels against the unmasked ones on a dy zeroed
// where the forward pass's ReLU output is not > 0: the same numbers enter
// the same arithmetic, so the results agree exactly, over every range and
// for dx == dy.
template <typename T>
void CheckReluMask(Case<T> k) {
  const int64_t c_n = k.l.channels;
  // The ReLU's input exactly 0 at the first element of channel 0 (its
  // shift 0 and its first element its mean) and -0 at the last element of
  // the last channel, in the scalar tail when the row is not a whole
  // number of runs: a zero must mask.
  k.shift[0] = T(0);
  k.x.front() = k.mean[0];
  k.shift[c_n - 1] = T(-0.0);
  k.x.back() = k.mean[c_n - 1];
  std::vector<T> relu_out(k.x.size());
  BlockedNormalize(k.l, k.x.data(), 0, c_n, k.mean.data(), k.scale.data(),
                   k.shift.data(), /*relu=*/true, relu_out.data());
  const ActivationInput<T> relu{k.scale.data(), k.shift.data()};
  std::vector<T> masked = k.dy;
  int64_t zeroed = 0;
  for (size_t i = 0; i < masked.size(); ++i) {
    if (!(relu_out[i] > 0)) masked[i] = T(0), ++zeroed;
  }
  // Random shifts leave both sides of the ReLU populated.
  ASSERT_GT(zeroed, 2);
  ASSERT_LT(zeroed, static_cast<int64_t>(masked.size()));

  for (const auto& [c0, c1] : Ranges(k.l)) {
    SCOPED_TRACE("channels [" + std::to_string(c0) + ", " + std::to_string(c1) +
                 ")");
    std::vector<double> sum_dy(c_n, kUntouched), sum_dy_xc(c_n, kUntouched);
    BlockedGradSums(k.l, k.dy.data(), k.x.data(), relu, c0, c1, k.mean.data(),
                    sum_dy.data(), sum_dy_xc.data());
    std::vector<double> want_dy(c_n, kUntouched), want_dy_xc(c_n, kUntouched);
    BlockedGradSums(k.l, masked.data(), k.x.data(), {}, c0, c1, k.mean.data(),
                    want_dy.data(), want_dy_xc.data());
    for (int64_t c = 0; c < c_n; ++c) {
      EXPECT_EQ(sum_dy[c], want_dy[c]) << c;
      EXPECT_EQ(sum_dy_xc[c], want_dy_xc[c]) << c;
    }

    std::vector<T> dx(k.x.size(), static_cast<T>(kUntouched));
    BlockedInputGrad(k.l, k.dy.data(), k.x.data(), relu, c0, c1, k.mean.data(),
                     k.a.data(), k.b.data(), k.d.data(), dx.data());
    std::vector<T> want(k.x.size(), static_cast<T>(kUntouched));
    BlockedInputGrad(k.l, masked.data(), k.x.data(), {}, c0, c1, k.mean.data(),
                     k.a.data(), k.b.data(), k.d.data(), want.data());
    for (size_t i = 0; i < dx.size(); ++i) EXPECT_EQ(dx[i], want[i]) << i;
  }

  std::vector<T> in_place = k.dy, want(k.x.size());
  BlockedInputGrad(k.l, masked.data(), k.x.data(), {}, 0, c_n, k.mean.data(),
                   k.a.data(), k.b.data(), k.d.data(), want.data());
  BlockedInputGrad(k.l, in_place.data(), k.x.data(), relu, 0, c_n,
                   k.mean.data(), k.a.data(), k.b.data(), k.d.data(),
                   in_place.data());
  EXPECT_EQ(in_place, want);
}

template <typename T>
void CheckAllShapes() {
  // P = 7 with B = 8 leaves a row that is not a whole number of 16-lane
  // runs; P = 1 gives rows of a single position.
  const int64_t shapes[][3] = {{3, 32, 7}, {2, 16, 1}, {2, 48, 5}, {1, 64, 2}};
  // B = 4 (oneDNN's SSE block) checks that any divisor of 16 works.
  for (int64_t block : {4, 8, 16}) {
    for (const auto& s : shapes) {
      const Case<T> k(s[0], s[1], s[2], block);
      for (const auto& [c0, c1] : Ranges(k.l)) {
        SCOPED_TRACE("N=" + std::to_string(s[0]) + " C=" +
                     std::to_string(s[1]) + " P=" + std::to_string(s[2]) +
                     " B=" + std::to_string(block) + " channels [" +
                     std::to_string(c0) + ", " + std::to_string(c1) + ")");
        CheckMeanVar(k, c0, c1);
        CheckNormalize(k, c0, c1, false);
        CheckNormalize(k, c0, c1, true);
        CheckGradSums(k, c0, c1);
        CheckInputGrad(k, c0, c1);
      }
      CheckInPlace(k);
    }
  }
}

TEST(BatchNormBlockedTest, FloatMatchesChannelKernels) {
  CheckAllShapes<float>();
}

TEST(BatchNormBlockedTest, DoubleMatchesChannelKernels) {
  CheckAllShapes<double>();
}

// Runs check(case) over shapes whose rows end in a scalar tail after the
// runs (P = 7 and P = 5 with B = 8), are all tail (P = 1) or whole runs
// (B = 16).
template <typename T, typename Check>
void ForTailShapes(const Check& check) {
  const int64_t shapes[][3] = {{3, 32, 7}, {2, 16, 1}, {2, 48, 5}, {1, 64, 2}};
  for (int64_t block : {4, 8, 16}) {
    for (const auto& s : shapes) {
      SCOPED_TRACE("N=" + std::to_string(s[0]) + " C=" + std::to_string(s[1]) +
                   " P=" + std::to_string(s[2]) +
                   " B=" + std::to_string(block));
      check(Case<T>(s[0], s[1], s[2], block));
    }
  }
}

template <typename T>
void CheckReluMaskAllShapes() {
  ForTailShapes<T>([](const Case<T>& k) { CheckReluMask(k); });
}

TEST(BatchNormBlockedTest, FloatReluMaskMatchesZeroedGrad) {
  CheckReluMaskAllShapes<float>();
}

TEST(BatchNormBlockedTest, DoubleReluMaskMatchesZeroedGrad) {
  CheckReluMaskAllShapes<double>();
}

// BlockedNormalizeSum against BlockedNormalize, AddInPlace and ReluForward
// in turn, bit for bit: over every range (neighbouring channels untouched),
// in place on the residual, with NaNs and exact cancellations in the sum.
// `all`'s elements of channels [c0, c1), kUntouched elsewhere.
template <typename T>
std::vector<T> OnlyChannels(const BlockedLayout& l, const std::vector<T>& all,
                            int64_t c0, int64_t c1) {
  std::vector<T> out(all.size(), static_cast<T>(kUntouched));
  for (size_t i = 0; i < all.size(); ++i) {
    const int64_t c =
        (i / (l.spatial * l.block)) % (l.channels / l.block) * l.block +
        i % l.block;
    if (Inside(c, c0, c1)) out[i] = all[i];
  }
  return out;
}

template <typename T>
void CheckNormalizeSum(const Case<T>& k) {
  const int64_t c_n = k.l.channels;
  std::vector<T> normalized(k.x.size());
  BlockedNormalize(k.l, k.x.data(), 0, c_n, k.mean.data(), k.scale.data(),
                   k.shift.data(), /*relu=*/false, normalized.data());
  std::vector<T> r = k.dy;
  r.front() = std::numeric_limits<T>::quiet_NaN();
  r.back() = -normalized.back();  // the sum is exactly zero
  if (r.size() > 2) r[1] = -normalized[1];
  for (bool relu : {false, true}) {
    std::vector<T> want = normalized;
    AddInPlace(r.data(), want.data(), static_cast<int64_t>(want.size()));
    if (relu) {
      ReluForward(want.data(), want.data(), static_cast<int64_t>(want.size()));
    }
    for (const auto& [c0, c1] : Ranges(k.l)) {
      std::vector<T> y(k.x.size(), static_cast<T>(kUntouched));
      BlockedNormalizeSum(k.l, k.x.data(), r.data(), c0, c1, k.mean.data(),
                          k.scale.data(), k.shift.data(), relu, y.data());
      EXPECT_EQ(FirstBitDifference(y, OnlyChannels(k.l, want, c0, c1)), -1)
          << "relu " << relu << " channels [" << c0 << ", " << c1 << ")";
    }
    std::vector<T> in_place = r;
    BlockedNormalizeSum(k.l, k.x.data(), in_place.data(), 0, c_n, k.mean.data(),
                        k.scale.data(), k.shift.data(), relu, in_place.data());
    EXPECT_EQ(FirstBitDifference(in_place, want), -1)
        << "in place, relu " << relu;
  }
}

template <typename T>
void CheckNormalizeSumAllShapes() {
  ForTailShapes<T>([](const Case<T>& k) { CheckNormalizeSum(k); });
}

TEST(BatchNormBlockedTest, FloatSumGivesTheBitsOfTheStepsInTurn) {
  CheckNormalizeSumAllShapes<float>();
}

TEST(BatchNormBlockedTest, DoubleSumGivesTheBitsOfTheStepsInTurn) {
  CheckNormalizeSumAllShapes<double>();
}

// A channel whose mean dwarfs its spread, with statistics exact in binary:
// three elements of 4096 and three of 4097 in every channel.
TEST(BatchNormBlockedTest, VarianceOfLargeMeanChannel) {
  const BlockedLayout l{2, 8, 3, 8};
  std::vector<float> x(l.batch * l.channels * l.spatial);
  for (int64_t n = 0; n < l.batch; ++n) {
    for (int64_t c = 0; c < l.channels; ++c) {
      for (int64_t p = 0; p < l.spatial; ++p) {
        x[BlockedIndex(l, n, c, p)] = 4096.0f + ((n * l.spatial + p) % 2);
      }
    }
  }
  std::vector<double> mean(l.channels), var(l.channels);
  BlockedMeanVar(l, x.data(), 0, l.channels, mean.data(), var.data());
  for (int64_t c = 0; c < l.channels; ++c) {
    EXPECT_DOUBLE_EQ(mean[c], 4096.5) << c;
    EXPECT_DOUBLE_EQ(var[c], 0.25) << c;
  }
}

}  // namespace
}  // namespace cohort

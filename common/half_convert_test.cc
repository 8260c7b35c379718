#include "common/half_convert.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/half.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

float Bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Every FP16 value converts back to itself, in vector and tail lanes.
TEST(HalfConvert, Fp16RoundTripsEveryValue) {
  std::vector<uint16_t> all;
  for (uint32_t h = 0; h < 65536; ++h) {
    if (((h >> 10) & 0x1f) != 0x1f) all.push_back(static_cast<uint16_t>(h));
  }
  std::vector<float> f(all.size());
  HalfToFloat(HalfFormat::kFp16, all.data(), f.data(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(f[i], HalfToFloat(all[i])) << all[i];
  }
  std::vector<uint16_t> back(all.size());
  FloatToHalf(HalfFormat::kFp16, f.data(), 1.0f, kFp16Max, back.data(),
              f.size());
  for (size_t i = 0; i < all.size(); ++i) {
    // -0 and +0 both stay what they were.
    ASSERT_EQ(back[i], all[i]) << i;
  }
}

// Halfway cases go to the even neighbour; overflow saturates; NaN stays.
TEST(HalfConvert, Fp16RoundsToNearestEvenAndSaturates) {
  const float one_ulp = std::ldexp(1.0f, -10);
  const std::vector<float> in = {1.0f + one_ulp / 2,
                                 1.0f + 1.5f * one_ulp,
                                 1e6f,
                                 -1e6f,
                                 std::numeric_limits<float>::quiet_NaN(),
                                 70000.0f,
                                 3.0f,
                                 -2.5f,
                                 1e-3f};
  std::vector<uint16_t> h(in.size());
  FloatToHalf(HalfFormat::kFp16, in.data(), 1.0f, kFp16Max, h.data(),
              in.size());
  EXPECT_EQ(HalfToFloat(h[0]), 1.0f);
  EXPECT_EQ(HalfToFloat(h[1]), 1.0f + 2 * one_ulp);
  EXPECT_EQ(HalfToFloat(h[2]), kFp16Max);
  EXPECT_EQ(HalfToFloat(h[3]), -kFp16Max);
  EXPECT_TRUE(std::isnan(HalfToFloat(h[4])));
  EXPECT_EQ(HalfToFloat(h[5]), kFp16Max);
  EXPECT_EQ(HalfToFloat(h[6]), 3.0f);
  EXPECT_EQ(HalfToFloat(h[7]), -2.5f);
}

TEST(HalfConvert, Bf16RoundsToNearestEvenAndKeepsRange) {
  const float one_ulp = std::ldexp(1.0f, -7);
  const std::vector<float> in = {1.0f + one_ulp / 2, 1.0f + 1.5f * one_ulp,
                                 1e30f, std::numeric_limits<float>::quiet_NaN(),
                                 -0.0f};
  std::vector<uint16_t> h(in.size());
  FloatToHalf(HalfFormat::kBf16, in.data(), 2.0f, kFp16Max, h.data(),
              in.size());
  EXPECT_EQ(Bf16(h[0]), 2.0f);
  EXPECT_EQ(Bf16(h[1]), 2.0f + 4 * one_ulp);
  EXPECT_NEAR(Bf16(h[2]), 2e30f, 2e30f / 128);
  EXPECT_TRUE(std::isnan(Bf16(h[3])));
  EXPECT_EQ(h[4], 0x8000);
  std::vector<float> back(in.size());
  HalfToFloat(HalfFormat::kBf16, h.data(), back.data(), h.size());
  EXPECT_EQ(back[0], 2.0f);
}

// The 8-lane BF16 path rounds as the one-at-a-time tail does, halfway
// cases, NaN and infinities included.
TEST(HalfConvert, Bf16VectorLanesMatchTheScalarTail) {
  std::vector<float> in;
  uint32_t seed = 1;
  for (int i = 0; i < 4096; ++i) {
    seed = seed * 1664525u + 1013904223u;
    uint32_t bits = seed;
    if (i % 7 == 0) bits = (bits & 0xffff0000u) | 0x8000u;  // halfway
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    in.push_back(f);
  }
  in.push_back(std::numeric_limits<float>::infinity());
  in.push_back(-std::numeric_limits<float>::infinity());
  in.push_back(std::numeric_limits<float>::quiet_NaN());
  while (in.size() % 8 != 0) in.push_back(1.0f);
  std::vector<uint16_t> vec(in.size()), one(1);
  FloatToHalf(HalfFormat::kBf16, in.data(), 1.0f, kFp16Max, vec.data(),
              in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    // A single element always takes the scalar tail.
    FloatToHalf(HalfFormat::kBf16, &in[i], 1.0f, kFp16Max, one.data(), 1);
    ASSERT_EQ(vec[i], one[0]) << i;
  }
  std::vector<float> back(in.size());
  HalfToFloat(HalfFormat::kBf16, vec.data(), back.data(), vec.size());
  for (size_t i = 0; i < vec.size(); ++i) {
    float f;
    HalfToFloat(HalfFormat::kBf16, &vec[i], &f, 1);
    ASSERT_EQ(std::memcmp(&f, &back[i], sizeof(f)), 0) << i;
  }
}

TEST(HalfConvert, SumsInFloatAndRoundsOnce) {
  for (HalfFormat format : {HalfFormat::kFp16, HalfFormat::kBf16}) {
    std::vector<float> a(19), b(19);
    for (int i = 0; i < 19; ++i) {
      a[i] = 0.37f * i - 3;
      b[i] = 1.0f / (i + 1);
    }
    std::vector<uint16_t> ha(19), hb(19);
    FloatToHalf(format, a.data(), 1.0f, kFp16Max, ha.data(), 19);
    FloatToHalf(format, b.data(), 1.0f, kFp16Max, hb.data(), 19);
    std::vector<float> fa(19), fb(19), sum(19);
    HalfToFloat(format, ha.data(), fa.data(), 19);
    HalfToFloat(format, hb.data(), fb.data(), 19);
    SumHalf(format, ha.data(), hb.data(), 19);
    HalfToFloat(format, ha.data(), sum.data(), 19);
    for (int i = 0; i < 19; ++i) {
      uint16_t expect;
      const float exact = fa[i] + fb[i];
      FloatToHalf(format, &exact, 1.0f, kFp16Max, &expect, 1);
      float e;
      HalfToFloat(format, &expect, &e, 1);
      EXPECT_EQ(sum[i], e) << i;
    }
  }
}

// Per-rank terms at the floor of max / ranks never sum past the range.
TEST(HalfConvert, Fp16FloorBoundsTheSum) {
  for (int ranks = 1; ranks <= 9; ++ranks) {
    const float limit = Fp16FloorValue(kFp16Max / ranks);
    EXPECT_LE(limit, kFp16Max / ranks);
    uint16_t acc;
    FloatToHalf(HalfFormat::kFp16, &limit, 1.0f, kFp16Max, &acc, 1);
    for (int r = 1; r < ranks; ++r) {
      uint16_t term;
      FloatToHalf(HalfFormat::kFp16, &limit, 1.0f, kFp16Max, &term, 1);
      SumHalf(HalfFormat::kFp16, &acc, &term, 1);
    }
    EXPECT_TRUE(std::isfinite(HalfToFloat(acc))) << ranks;
  }
}

}  // namespace
}  // namespace cohort

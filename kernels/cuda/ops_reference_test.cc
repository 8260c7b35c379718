// The CPU reference conversions and the dropout RNG (kernels/cuda/
// ops_reference.h, dropout_rng.h). Runs in every configuration.
#include "kernels/cuda/ops_reference.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/dropout_rng.h"

namespace cohort {
namespace {

float FloatOf(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

uint32_t BitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
}

constexpr float kInf = std::numeric_limits<float>::infinity();

// ---------------------------------------------------------------------- bf16

TEST(Bf16Reference, ExactValuesAndSpecials) {
  EXPECT_EQ(Bf16FromFloat(0.0f), 0x0000);
  EXPECT_EQ(Bf16FromFloat(-0.0f), 0x8000);
  EXPECT_EQ(Bf16FromFloat(1.0f), 0x3f80);
  EXPECT_EQ(Bf16FromFloat(-2.0f), 0xc000);
  EXPECT_EQ(Bf16FromFloat(kInf), 0x7f80);
  EXPECT_EQ(Bf16FromFloat(-kInf), 0xff80);
  // The largest finite float rounds up to infinity; the largest bf16 stays.
  EXPECT_EQ(Bf16FromFloat(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(Bf16FromFloat(FloatOf(0x7f7f0000u)), 0x7f7f);
  // Float subnormals keep their top bits (bf16 has the same exponent range).
  EXPECT_EQ(Bf16FromFloat(FloatOf(0x00010000u)), 0x0001);
  EXPECT_EQ(Bf16FromFloat(FloatOf(0x00000001u)), 0x0000);  // rounds to 0
  EXPECT_EQ(Bf16FromFloat(FloatOf(0x80008000u)), 0x8000);  // tie to even 0
  EXPECT_EQ(Bf16FromFloat(FloatOf(0x00018000u)), 0x0002);  // tie to even 2
  // Subnormal rounding up into the smallest normal.
  EXPECT_EQ(Bf16FromFloat(FloatOf(0x007fffffu)), 0x0080);
}

TEST(Bf16Reference, RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between 1 (even mantissa) and 1 + 2^-7: down.
  EXPECT_EQ(Bf16FromFloat(FloatOf(0x3f808000u)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
  EXPECT_EQ(Bf16FromFloat(FloatOf(0x3f818000u)), 0x3f82);
  // Just above and below the halfway point.
  EXPECT_EQ(Bf16FromFloat(FloatOf(0x3f808001u)), 0x3f81);
  EXPECT_EQ(Bf16FromFloat(FloatOf(0x3f807fffu)), 0x3f80);
  // Negative ties behave symmetrically.
  EXPECT_EQ(Bf16FromFloat(FloatOf(0xbf808000u)), 0xbf80);
  EXPECT_EQ(Bf16FromFloat(FloatOf(0xbf818000u)), 0xbf82);
  // A carry through the mantissa into the exponent.
  EXPECT_EQ(Bf16FromFloat(FloatOf(0x3fffffffu)), 0x4000);
}

TEST(Bf16Reference, NanBecomesCanonical) {
  EXPECT_EQ(Bf16FromFloat(std::numeric_limits<float>::quiet_NaN()), 0x7fff);
  EXPECT_EQ(Bf16FromFloat(-std::numeric_limits<float>::quiet_NaN()), 0x7fff);
  // A signalling NaN whose payload lives only in the dropped low bits must
  // not round to infinity.
  EXPECT_EQ(Bf16FromFloat(FloatOf(0x7f800001u)), 0x7fff);
  EXPECT_EQ(Bf16FromFloat(FloatOf(0xffffffffu)), 0x7fff);
}

TEST(Bf16Reference, WideningIsExactAndRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = FloatFromBf16(static_cast<uint16_t>(h));
    ASSERT_EQ(BitsOf(f), h << 16) << "bf16 0x" << std::hex << h;
    if (!std::isnan(f)) {
      ASSERT_EQ(Bf16FromFloat(f), h) << "bf16 0x" << std::hex << h;
    }
  }
}

// Every float whose low 16 bits follow a pattern, against the definition:
// the nearer of the two bf16 neighbours (truncation and truncation + 1
// ulp), the even one on a tie.
TEST(Bf16Reference, MatchesNearestNeighbourDefinition) {
  for (uint32_t high = 0; high <= 0xffff; ++high) {
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu,
                         0x1234u, 0xc000u}) {
      const uint32_t u = high << 16 | low;
      const float x = FloatOf(u);
      if (std::isnan(x)) continue;
      const uint16_t got = Bf16FromFloat(x);
      const uint16_t down = static_cast<uint16_t>(high);
      const uint16_t up = static_cast<uint16_t>(high + 1);  // |x| direction
      const uint16_t want = low < 0x8000u   ? down
                            : low > 0x8000u ? up
                            : (down & 1)    ? up
                                            : down;
      ASSERT_EQ(got, want) << "float bits 0x" << std::hex << u;
    }
  }
}

// ---------------------------------------------------------------------- fp16

TEST(Fp16Reference, ExactValuesAndSpecials) {
  EXPECT_EQ(Fp16FromFloat(0.0f), 0x0000);
  EXPECT_EQ(Fp16FromFloat(-0.0f), 0x8000);
  EXPECT_EQ(Fp16FromFloat(1.0f), 0x3c00);
  EXPECT_EQ(Fp16FromFloat(-2.0f), 0xc000);
  EXPECT_EQ(Fp16FromFloat(0.5f), 0x3800);
  EXPECT_EQ(Fp16FromFloat(65504.0f), 0x7bff);  // largest finite fp16
  EXPECT_EQ(Fp16FromFloat(kInf), 0x7c00);
  EXPECT_EQ(Fp16FromFloat(-kInf), 0xfc00);
  EXPECT_EQ(Fp16FromFloat(1e10f), 0x7c00);
  EXPECT_EQ(Fp16FromFloat(-1e10f), 0xfc00);
  EXPECT_EQ(Fp16FromFloat(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(Fp16FromFloat(0x1p-14f), 0x0400);  // smallest normal
  EXPECT_EQ(Fp16FromFloat(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(Fp16FromFloat(-0x1p-24f), 0x8001);
  EXPECT_EQ(Fp16FromFloat(0x3p-24f), 0x0003);
  EXPECT_EQ(Fp16FromFloat(0x1p-15f), 0x0200);  // largest power-2 subnormal
  // Float subnormals and tiny normals vanish, keeping the sign.
  EXPECT_EQ(Fp16FromFloat(FloatOf(0x00000001u)), 0x0000);
  EXPECT_EQ(Fp16FromFloat(FloatOf(0x80400000u)), 0x8000);
  EXPECT_EQ(Fp16FromFloat(0x1p-30f), 0x0000);
}

TEST(Fp16Reference, RoundsToNearestEven) {
  // Normals: 1 + 2^-11 is halfway between 1 (even) and 1 + 2^-10: down.
  EXPECT_EQ(Fp16FromFloat(1.0f + 0x1p-11f), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9: up.
  EXPECT_EQ(Fp16FromFloat(1.0f + 0x3p-11f), 0x3c02);
  EXPECT_EQ(Fp16FromFloat(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  EXPECT_EQ(Fp16FromFloat(-(1.0f + 0x3p-11f)), 0xbc02);
  // Overflow: 65520 is halfway between 65504 (odd mantissa 0x3ff) and
  // 65536 (infinity): up. Just below stays finite.
  EXPECT_EQ(Fp16FromFloat(65520.0f), 0x7c00);
  EXPECT_EQ(Fp16FromFloat(65519.996f), 0x7bff);
  // Subnormals: 2^-25 ties between 0 (even) and 2^-24: down; a hair more
  // rounds up.
  EXPECT_EQ(Fp16FromFloat(0x1p-25f), 0x0000);
  EXPECT_EQ(Fp16FromFloat(-0x1p-25f), 0x8000);
  EXPECT_EQ(Fp16FromFloat(FloatOf(0x33000001u)), 0x0001);
  // 1.5 * 2^-24 ties between 1 (odd) and 2: up; 2.5 * 2^-24 down to 2.
  EXPECT_EQ(Fp16FromFloat(0x3p-25f), 0x0002);
  EXPECT_EQ(Fp16FromFloat(0x5p-25f), 0x0002);
  // The largest subnormal plus half an ulp rounds into the smallest normal.
  EXPECT_EQ(Fp16FromFloat(0x7ffp-25f), 0x0400);
  EXPECT_EQ(Fp16FromFloat(0x3ffp-24f), 0x03ff);
}

TEST(Fp16Reference, NanBecomesCanonical) {
  EXPECT_EQ(Fp16FromFloat(std::numeric_limits<float>::quiet_NaN()), 0x7fff);
  EXPECT_EQ(Fp16FromFloat(FloatOf(0x7f800001u)), 0x7fff);
  EXPECT_EQ(Fp16FromFloat(FloatOf(0xffc00000u)), 0x7fff);
}

TEST(Fp16Reference, WideningIsExact) {
  EXPECT_EQ(FloatFromFp16(0x3c00), 1.0f);
  EXPECT_EQ(FloatFromFp16(0xc000), -2.0f);
  EXPECT_EQ(FloatFromFp16(0x7bff), 65504.0f);
  EXPECT_EQ(FloatFromFp16(0x0001), 0x1p-24f);
  EXPECT_EQ(FloatFromFp16(0x83ff), -0x3ffp-24f);
  EXPECT_EQ(FloatFromFp16(0x7c00), kInf);
  EXPECT_EQ(FloatFromFp16(0xfc00), -kInf);
  EXPECT_EQ(BitsOf(FloatFromFp16(0x8000)), 0x80000000u);
  EXPECT_TRUE(std::isnan(FloatFromFp16(0x7e00)));
  EXPECT_TRUE(std::isnan(FloatFromFp16(0xfc01)));
  // NaN payloads are kept (shifted into the float mantissa).
  EXPECT_EQ(BitsOf(FloatFromFp16(0x7d23)), 0x7fa46000u);
}

// Every fp16 value widens to a float that narrows back to itself, and the
// widened values are strictly increasing over the positive encodings.
TEST(Fp16Reference, RoundTripsAndIsMonotonic) {
  float previous = -1.0f;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = FloatFromFp16(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(Fp16FromFloat(f), h) << "fp16 0x" << std::hex << h;
    if (h <= 0x7c00) {
      ASSERT_GT(f, previous) << "fp16 0x" << std::hex << h;
      previous = f;
    }
  }
}

// Each float between two adjacent fp16 values narrows to the nearer one
// (the even one on a tie): checked at the midpoints and one float ulp to
// either side of them, over the whole finite positive and negative range
// (the step to infinity is in RoundsToNearestEven).
TEST(Fp16Reference, MidpointsRoundToNearestEven) {
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    for (uint32_t sign : {0u, 0x8000u}) {
      const uint16_t lo = static_cast<uint16_t>(sign | h);
      const uint16_t hi = static_cast<uint16_t>(sign | (h + 1));
      const double a = FloatFromFp16(lo), b = FloatFromFp16(hi);
      const float mid = static_cast<float>((a + b) / 2);  // exact in float
      ASSERT_EQ(static_cast<double>(mid), (a + b) / 2);
      const uint16_t even = (h & 1) ? hi : lo;
      ASSERT_EQ(Fp16FromFloat(mid), even) << "fp16 0x" << std::hex << lo;
      const float toward_a = std::nextafter(mid, static_cast<float>(a));
      const float toward_b = std::nextafter(mid, static_cast<float>(b));
      ASSERT_EQ(Fp16FromFloat(toward_a), lo) << "fp16 0x" << std::hex << lo;
      ASSERT_EQ(Fp16FromFloat(toward_b), hi) << "fp16 0x" << std::hex << lo;
    }
  }
}

// -------------------------------------------------------------- dropout RNG

TEST(DropoutRng, KeepsAboutOneMinusPOfTheElements) {
  constexpr int64_t kN = 1 << 20;
  std::vector<uint8_t> mask(kN);
  for (double p : {0.1, 0.25, 0.5, 0.9}) {
    DropoutMaskReference(/*seed=*/12345, /*offset=*/0, kN, p, mask.data());
    int64_t kept = 0;
    for (uint8_t m : mask) kept += m;
    const double expected = (1 - p) * kN;
    const double sigma = std::sqrt(kN * p * (1 - p));
    EXPECT_NEAR(kept, expected, 6 * sigma) << "p = " << p;
  }
}

TEST(DropoutRng, ZeroProbabilityKeepsEverything) {
  std::vector<uint8_t> mask(10000);
  DropoutMaskReference(7, 0, mask.size(), 0.0, mask.data());
  for (uint8_t m : mask) ASSERT_EQ(m, 1);
}

TEST(DropoutRng, DeterministicPerSeedAndOffset) {
  constexpr int64_t kN = 4096;
  std::vector<uint8_t> a(kN), b(kN), other_seed(kN), other_offset(kN);
  DropoutMaskReference(42, 1000, kN, 0.5, a.data());
  DropoutMaskReference(42, 1000, kN, 0.5, b.data());
  EXPECT_EQ(a, b);
  DropoutMaskReference(43, 1000, kN, 0.5, other_seed.data());
  DropoutMaskReference(42, 1001, kN, 0.5, other_offset.data());
  EXPECT_NE(a, other_seed);
  EXPECT_NE(a, other_offset);
  // Masks of different seeds agree on about half the elements, as
  // independent fair coins would.
  int64_t same = 0;
  for (int64_t i = 0; i < kN; ++i) same += a[i] == other_seed[i];
  EXPECT_NEAR(same, kN / 2, 6 * std::sqrt(kN / 4.0));
}

// One call over [0, n) equals two calls split at k with offset k: what lets
// a kernel decide each element independently and a tensor be processed in
// pieces.
TEST(DropoutRng, OffsetContinuesTheStream) {
  constexpr int64_t kN = 1000, kSplit = 357;
  std::vector<uint8_t> whole(kN), pieces(kN);
  DropoutMaskReference(9, 50, kN, 0.3, whole.data());
  DropoutMaskReference(9, 50, kSplit, 0.3, pieces.data());
  DropoutMaskReference(9, 50 + kSplit, kN - kSplit, 0.3,
                       pieces.data() + kSplit);
  EXPECT_EQ(whole, pieces);
}

TEST(DropoutRng, HashIsSplitMix64) {
  // SplitMix64 seeded with state s returns Mix(s + k * gamma) as its k-th
  // output (k = 1, 2, ...); with key Mix(0) = 0 this is the stream seeded 0,
  // whose first outputs are published (e.g. in the xoshiro reference code).
  EXPECT_EQ(SplitMix64Mix(0), 0u);
  EXPECT_EQ(DropoutHash(0, 0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(DropoutHash(0, 1), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(DropoutHash(0, 2), 0x06c45d188009454full);
}

TEST(DropoutRng, ThresholdIsPTimesTwoTo32) {
  EXPECT_EQ(DropoutThreshold(0.0), 0u);
  EXPECT_EQ(DropoutThreshold(0.5), 1ull << 31);
  EXPECT_EQ(DropoutThreshold(0.25), 1ull << 30);
  EXPECT_LT(DropoutThreshold(std::nextafter(1.0, 0.0)), 1ull << 32);
  // With threshold t, a uniform u in [0, 2^32) is kept iff u >= t.
  EXPECT_TRUE(DropoutKeep(1, 2, 0));
}

}  // namespace
}  // namespace cohort

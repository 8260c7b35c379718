#include "common/checked_int.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace cohort {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(CheckedInt, ExactWithinRange) {
  const CheckedInt n = CheckedInt(784) * 2147483647 + 2147483647;
  EXPECT_FALSE(n.overflow());
  EXPECT_EQ(n.value(), int64_t{785} * 2147483647);
}

TEST(CheckedInt, ProductPastRangeOverflowsInsteadOfWrapping) {
  const CheckedInt n = CheckedInt(int64_t{1} << 32) * (int64_t{1} << 31);
  EXPECT_TRUE(n.overflow());
  EXPECT_EQ(n.value(), kMax);  // "too much", never a small or negative size
  EXPECT_FALSE((CheckedInt(int64_t{1} << 31) * (int64_t{1} << 31)).overflow());
}

TEST(CheckedInt, SumPastRangeOverflows) {
  EXPECT_TRUE((CheckedInt(kMax) + 1).overflow());
  EXPECT_FALSE((CheckedInt(kMax - 1) + 1).overflow());
}

TEST(CheckedInt, OverflowSticksThroughLaterArithmetic) {
  CheckedInt n = CheckedInt(kMax) * 2;
  n += 1;
  n *= 0;  // zero times "too much" is still "too much"
  EXPECT_TRUE(n.overflow());
  EXPECT_TRUE((CheckedInt(0) * CheckedInt::Overflow()).overflow());
}

TEST(CheckedInt, OverflowComparesAboveEverything) {
  EXPECT_TRUE(CheckedInt(kMax) < CheckedInt::Overflow());
  EXPECT_FALSE(CheckedInt::Overflow() < CheckedInt(kMax));
  EXPECT_TRUE(CheckedInt::Overflow() > CheckedInt(0));
  EXPECT_EQ(CheckedInt::Overflow(), CheckedInt(kMax) + 1);
  EXPECT_NE(CheckedInt::Overflow(), CheckedInt(kMax));
  EXPECT_TRUE(CheckedInt(3) < CheckedInt(4));
}

TEST(CheckedInt, RoundUpTo) {
  EXPECT_EQ(RoundUpTo(0, 16).value(), 0);
  EXPECT_EQ(RoundUpTo(1, 16).value(), 16);
  EXPECT_EQ(RoundUpTo(32, 16).value(), 32);
  EXPECT_TRUE(RoundUpTo(kMax - 3, 16).overflow());
  EXPECT_TRUE(RoundUpTo(CheckedInt::Overflow(), 16).overflow());
}

}  // namespace
}  // namespace cohort

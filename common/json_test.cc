#include "common/json.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(Json, EscapesStrings) {
  EXPECT_EQ(JsonString("a\"b\\c\nd"), "\"a\\\"b\\\\c\\u000ad\"");
}

TEST(Json, NumbersAndNull) {
  EXPECT_EQ(JsonNumber(0.5), "0.5");
  EXPECT_EQ(JsonNumber(std::nan("")), "null");
  EXPECT_EQ(JsonNumber(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(JsonOptional(-1), "null");
  EXPECT_EQ(JsonOptional(0.98), "0.98");
}

}  // namespace
}  // namespace cohort

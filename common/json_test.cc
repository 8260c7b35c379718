#include "common/json.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
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

using ::testing::HasSubstr;

// Seconds to parse `text` `times` times over.
double SecondsToParse(const std::string& text, int times) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < times; ++i) {
    const absl::StatusOr<JsonValue> v = ParseJson(text);
    EXPECT_TRUE(v.ok()) << v.status();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

TEST(JsonReader, ReadsEveryKindOfValue) {
  absl::StatusOr<JsonValue> v = ParseJson(
      " {\"a\": [1, -2.5e1, true, false, null], \"b\\u00e9\\ud83d\\ude00\": "
      "\"x\\n\\\"\", \"n\": 18446744073709551615} ");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->type, JsonValue::Type::kObject);
  const JsonValue* a = v->Find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->array.size(), 5u);
  EXPECT_EQ(a->array[1].number, -25);
  EXPECT_TRUE(a->array[2].boolean);
  EXPECT_EQ(a->array[4].type, JsonValue::Type::kNull);
  const JsonValue* b = v->Find("b\u00e9\U0001F600");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->text, "x\n\"");
  uint64_t n = 0;
  EXPECT_TRUE(v->Find("n")->AsUint64(&n));
  EXPECT_EQ(n, 18446744073709551615u);
  EXPECT_FALSE(a->array[1].AsUint64(&n));
}

TEST(JsonReader, RefusesMalformedTextWithTheByteOffset) {
  const auto error = [](const std::string& text) {
    absl::StatusOr<JsonValue> v = ParseJson(text);
    return v.ok() ? std::string("OK") : std::string(v.status().message());
  };
  EXPECT_EQ(error("[1, 2"),
            "at byte 5: ',' or ']' expected, not the end of "
            "the text");
  EXPECT_EQ(error("{\"a\": 1} x"), "at byte 9: more text after the JSON value");
  EXPECT_EQ(error("[\"a\nb\"]"),
            "at byte 3: a control character inside a string (escape it)");
  EXPECT_EQ(error("[\"\\ud800\"]"), "at byte 8: a lone high surrogate");
  EXPECT_EQ(error("{\"k\": 1, \"k\": 2}"),
            "at byte 9: the key \"k\" appears twice in one object");
  EXPECT_EQ(error("[\n\x01]"), "at byte 2: a value expected, not '\\x01'");
  EXPECT_EQ(error("[-]"), "at byte 1: a value expected, not '-'");
  EXPECT_EQ(error(""), "at byte 0: a value is missing");
}

// Nested arrays were once unbounded (and quadratic): a 2 MB file of them
// ran for minutes. Arrays and objects now share one depth bound.
TEST(JsonReader, RefusesDeepNestingOfArraysAndObjectsAtOnce) {
  const std::string arrays(1000000, '[');
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<JsonValue> v = ParseJson(arrays);
  EXPECT_LT(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count(),
      0.5);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(v.status().message(),
            "at byte 64: arrays and objects nest deeper than 64 levels");
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  v = ParseJson(objects);
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("nest deeper than 64 levels"));
  std::string deepest = std::string(64, '[') + std::string(64, ']');
  EXPECT_TRUE(ParseJson(deepest).ok());
  EXPECT_FALSE(ParseJson("[" + deepest + "]").ok());
  JsonLimits shallow;
  shallow.max_depth = 1;
  EXPECT_FALSE(ParseJson("[[1]]", shallow).ok());
}

TEST(JsonReader, BoundsTheNumberOfValues) {
  JsonLimits few;
  few.max_values = 3;
  EXPECT_TRUE(ParseJson("[1, 2]", few).ok());
  const absl::StatusOr<JsonValue> v = ParseJson("[1, 2, 3]", few);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(), "at byte 7: more than 3 values");
}

// Time linear in the size: one wide, shallow document 16 times as large as
// another takes about as long as 16 parses of the small one (a few times
// longer: it fits no cache), where a quadratic reader would take 16 times
// longer still. Runs of similar length share a loaded machine's slices
// alike; the best of three counts.
TEST(JsonReader, WideDocumentsParseInLinearTime) {
  const auto wide = [](int n) {
    std::string s = "{\"t\": [";
    for (int i = 0; i < n; ++i) absl::StrAppend(&s, i ? ", " : "", "[", i, "]");
    return s + "], \"m\": {\"k\": \"" + std::string(5 * n, 'v') + "\"}}";
  };
  const std::string small = wide(10000), large = wide(160000);
  ASSERT_GT(large.size(), 2u << 20);
  ASSERT_GT(large.size(), 16 * small.size());
  double t_small = 1e9, t_large = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    t_small = std::min(t_small, SecondsToParse(small, 16));
    t_large = std::min(t_large, SecondsToParse(large, 1));
  }
  EXPECT_LT(t_large, 5.0);
  EXPECT_LT(t_large, 40 * t_small)
      << "16 small " << t_small << " s, large " << t_large << " s";
}

}  // namespace
}  // namespace cohort

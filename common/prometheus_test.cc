#include "common/prometheus.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(PrometheusTextTest, GroupsEachFamilyWhateverTheOrderOfSamples) {
  PrometheusText t;
  t.Declare("cohort_worker_step", PrometheusText::Type::kGauge, "Step.");
  t.Declare("cohort_worker_bytes_total", PrometheusText::Type::kCounter,
            "Bytes.");
  for (int rank = 0; rank < 2; ++rank) {
    const PrometheusLabels l = {{"rank", std::to_string(rank)}};
    t.Add("cohort_worker_step", l, 10 + rank);
    t.Add("cohort_worker_bytes_total", l, 1000 * (rank + 1));
  }
  t.Gauge("cohort_uptime_seconds", "Uptime.", 1.5);
  EXPECT_EQ(t.Render(),
            "# HELP cohort_worker_step Step.\n"
            "# TYPE cohort_worker_step gauge\n"
            "cohort_worker_step{rank=\"0\"} 10\n"
            "cohort_worker_step{rank=\"1\"} 11\n"
            "# HELP cohort_worker_bytes_total Bytes.\n"
            "# TYPE cohort_worker_bytes_total counter\n"
            "cohort_worker_bytes_total{rank=\"0\"} 1000\n"
            "cohort_worker_bytes_total{rank=\"1\"} 2000\n"
            "# HELP cohort_uptime_seconds Uptime.\n"
            "# TYPE cohort_uptime_seconds gauge\n"
            "cohort_uptime_seconds 1.5\n");
}

TEST(PrometheusTextTest, EscapesLabelValuesAndHelp) {
  PrometheusText t;
  t.Declare("m", PrometheusText::Type::kUntyped, "a \\ b\nc \"d\"");
  t.Add("m", {{"host", "a\"b\\c\nd"}, {"x", ""}}, 1);
  EXPECT_EQ(t.Render(),
            "# HELP m a \\\\ b\\nc \"d\"\n"
            "# TYPE m untyped\n"
            "m{host=\"a\\\"b\\\\c\\nd\",x=\"\"} 1\n");
}

TEST(PrometheusTextTest, DropsDuplicateLabelSetsAndEmptyFamilies) {
  PrometheusText t;
  t.Declare("empty", PrometheusText::Type::kGauge, "none");
  t.Declare("m", PrometheusText::Type::kGauge, "h");
  EXPECT_TRUE(t.Add("m", {{"rank", "0"}}, 1));
  EXPECT_FALSE(t.Add("m", {{"rank", "0"}}, 2));
  EXPECT_TRUE(t.Add("m", {{"rank", "1"}}, 3));
  EXPECT_EQ(t.Render(),
            "# HELP m h\n# TYPE m gauge\nm{rank=\"0\"} 1\nm{rank=\"1\"} 3\n");
}

TEST(PrometheusTextTest, WritesValuesExactly) {
  EXPECT_EQ(PrometheusValue(0), "0");
  EXPECT_EQ(PrometheusValue(-3), "-3");
  EXPECT_EQ(PrometheusValue(1234567890123.0), "1234567890123");
  EXPECT_EQ(PrometheusValue(0.1), "0.1");
  EXPECT_EQ(PrometheusValue(1e-9), "1e-09");
  EXPECT_EQ(std::stod(PrometheusValue(1.0 / 3)), 1.0 / 3);
  EXPECT_EQ(PrometheusValue(1e300), "1e+300");
  EXPECT_EQ(PrometheusValue(std::nan("")), "NaN");
  EXPECT_EQ(PrometheusValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(PrometheusValue(-std::numeric_limits<double>::infinity()), "-Inf");
}

TEST(PrometheusTextDeathTest, UndeclaredOrMalformedNamesAreBugs) {
  PrometheusText t;
  EXPECT_DEATH(t.Add("nope", 1), "not declared");
  EXPECT_DEATH(t.Declare("9bad", PrometheusText::Type::kGauge, ""),
               "bad metric name");
  t.Declare("ok", PrometheusText::Type::kGauge, "");
  EXPECT_DEATH(t.Declare("ok", PrometheusText::Type::kGauge, ""), "twice");
  EXPECT_DEATH(t.Add("ok", {{"__x", "1"}}, 1), "bad label name");
}

}  // namespace
}  // namespace cohort

// Test helpers for Prometheus expositions (common/prometheus.h). Pure
// functions; thread-safe.
#ifndef COHORT_COMMON_PROMETHEUS_TEST_UTIL_H_
#define COHORT_COMMON_PROMETHEUS_TEST_UTIL_H_

#include <string>
#include <vector>

namespace cohort {

// Checks the structure the 0.0.4 format requires and promtool enforces:
// every sample's family has HELP and TYPE lines before it, a family's
// samples are contiguous, no family appears twice, no sample line twice.
// Returns the problems found.
std::vector<std::string> PrometheusFormatProblems(const std::string& text);

}  // namespace cohort

#endif  // COHORT_COMMON_PROMETHEUS_TEST_UTIL_H_

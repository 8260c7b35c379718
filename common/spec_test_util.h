// Helpers shared by the spec tests: parse a spec text as a file would be,
// and the message of its error.
#ifndef COHORT_COMMON_SPEC_TEST_UTIL_H_
#define COHORT_COMMON_SPEC_TEST_UTIL_H_

#include <string>

#include "common/spec.h"
#include "gtest/gtest.h"

namespace cohort {

inline constexpr char kFile[] = "jobs/x.textproto";

// The error message of parsing `text`, or "OK".
inline std::string ErrorOf(const std::string& text) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(text, kFile);
  if (spec.ok()) return "OK";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

// A valid spec; each test appends or edits lines so that line numbers in
// the expected messages stay easy to count (line 1 is `name`).
inline std::string Valid(const std::string& extra = "") {
  return "name: \"t\"\n"                // 1
         "model { zoo: \"lenet5\" }\n"  // 2
         "batch_size: 32\n"             // 3
         "epochs: 2\n"                  // 4
         "optimizer { lr: 0.1 }\n" +    // 5
         extra;                         // 6...
}

// A spec whose model is `layers` (one per line, from line 3).
inline std::string WithLayers(const std::string& layers) {
  return "batch_size: 8\nmax_steps: 10\nmodel {\n" + layers +
         "}\noptimizer { lr: 0.01 }\n";
}

}  // namespace cohort

#endif  // COHORT_COMMON_SPEC_TEST_UTIL_H_

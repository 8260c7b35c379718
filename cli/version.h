// What `cohort --version` (and `cohort COMMAND --version`) prints: the
// release, the coordinator protocol it speaks, the git commit it was built
// from (a stamped build: bazel build --stamp; "unknown" otherwise) and
// whether the GPU plugin is installed beside it (looked for, not loaded).
//
// Thread safety: pure functions.
#ifndef COHORT_CLI_VERSION_H_
#define COHORT_CLI_VERSION_H_

#include <string>

namespace cohort {

inline constexpr char kCohortVersion[] = "0.1.0";

// The git commit of the build, or "unknown".
std::string BuildCommit();

// Lines ending in a newline, e.g.
//   cohort 0.1.0 (coordinator protocol 2)
//   git commit: 1a2b3c4d5e6f
//   GPU plugin: found at /usr/local/bin/libcohort_gpu.so
std::string VersionText();

}  // namespace cohort

#endif  // COHORT_CLI_VERSION_H_

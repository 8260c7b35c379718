#include "cli/version.h"

#include "absl/strings/str_cat.h"
#include "proto/coordinator.pb.h"
#include "worker/gpu/gpu_plugin.h"

namespace cohort {

// Written by the build (cli/BUILD: build_info): the stamped commit, or
// "unknown".
extern const char kBuildGitCommit[];

std::string BuildCommit() {
  return kBuildGitCommit[0] == '\0' ? "unknown" : kBuildGitCommit;
}

std::string VersionText() {
  return absl::StrCat("cohort ", kCohortVersion, " (coordinator protocol ",
                      static_cast<int>(Protocol::CURRENT),
                      ")\ngit commit: ", BuildCommit(),
                      "\nGPU plugin: ", DescribeGpuPlugin(), "\n");
}

}  // namespace cohort

// Whole-file reads and crash-safe writes.
//
// WriteFileAtomically writes to a temporary file beside the target, fsyncs
// it, renames it over the target and fsyncs the directory: a reader sees the
// old file or the new one, never a mix, even after a crash. Both functions
// are thread-safe for different paths.
#ifndef COHORT_COMMON_FILES_H_
#define COHORT_COMMON_FILES_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

absl::StatusOr<std::string> ReadFile(const std::string& path);

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents);

}  // namespace cohort

#endif  // COHORT_COMMON_FILES_H_

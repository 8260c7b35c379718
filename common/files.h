// Whole-file reads and crash-safe writes.
//
// WriteFileAtomically writes to a temporary file beside the target, fsyncs
// it, renames it over the target and fsyncs the directory: a reader sees the
// old file or the new one, never a mix, even after a crash. Both functions
// are thread-safe for different paths.
#ifndef COHORT_COMMON_FILES_H_
#define COHORT_COMMON_FILES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

absl::StatusOr<std::string> ReadFile(const std::string& path);

// The contents of the regular file at `path`, for small files a user names
// (a job spec). Refused before reading, with InvalidArgument naming `what`
// and the path: a directory, a device (/dev/zero), a FIFO (opened without
// waiting for a writer), a socket, or a file larger than `max_bytes` (also
// one that grows past it while being read). An open failure has the errno's
// code ("cannot open WHAT PATH: No such file or directory"); a read error
// is DataLoss.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path,
                                            int64_t max_bytes,
                                            absl::string_view what);

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents);

// Before a long run: whether WriteFileAtomically(path, ...) can succeed,
// i.e. the directory exists and a file can be created in it and `path`
// is not a directory. Creates and removes a probe file; never touches
// `path`. INVALID_ARGUMENT naming the path and the reason.
absl::Status CheckCanWriteFile(const std::string& path);

// The same for a directory files will be written into: creates it (and
// its parents) if needed, then probes it.
absl::Status CheckCanWriteDir(const std::string& dir);

}  // namespace cohort

#endif  // COHORT_COMMON_FILES_H_

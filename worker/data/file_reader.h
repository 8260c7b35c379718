// Whole-file reads for the data set loaders, with transparent gunzip.
//
// Data set files are small enough (tens of MB) to read in one go, and a
// single read plus one inflate pass is much faster than streaming through
// gzread. Every error names the file and what was wrong with it.
//
// Ownership: results are returned by value. Thread safety: the functions
// are reentrant (no shared state).
#ifndef COHORT_WORKER_DATA_FILE_READER_H_
#define COHORT_WORKER_DATA_FILE_READER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cohort {

// Whether `path` names an existing regular file.
bool FileExists(const std::string& path);

// PermissionDenied naming `dir` when it exists but this process may not
// list or enter it (mode 000, another user's), which FileExists would
// otherwise report as files "not found". OK otherwise, missing included.
absl::Status CheckDirReadable(const std::string& dir);

// The bytes of `path`, or NotFound / DataLoss naming the file.
absl::StatusOr<std::vector<uint8_t>> ReadFileBytes(const std::string& path);

// Decompresses a complete gzip stream (one or more members) read from
// `path` (used in messages only): DataLoss for a missing gzip magic,
// corrupt data or a stream that ends early.
//
// `expected_size`, when given, is asked with the first bytes decompressed
// (a format's header) for the size the whole file must have; it returns 0
// while it needs more bytes. Decompression then stops one byte past that
// size, so a small file that inflates to gigabytes fails at once instead of
// exhausting memory.
using ExpectedSize = std::function<size_t(const uint8_t* head, size_t n)>;
absl::StatusOr<std::vector<uint8_t>> Gunzip(
    const std::vector<uint8_t>& gz, const std::string& path,
    const ExpectedSize& expected_size = nullptr);

// Reads `path`, decompressing it when its name ends in ".gz".
absl::StatusOr<std::vector<uint8_t>> ReadMaybeGzipped(
    const std::string& path, const ExpectedSize& expected_size = nullptr);

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_FILE_READER_H_

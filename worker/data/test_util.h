// Test helpers for the data package: finding the shared real-data
// directory, and writing fake data files into a scratch directory.
//
// The real data is never in the repository: it sits beside the checkout, at
// ../shared/data from the workspace root, or wherever COHORT_DATA_DIR says.
// Tests skip when it is absent, so a fresh clone still passes.
//
// Thread safety: reentrant (reads the environment and the file system).
#ifndef COHORT_WORKER_DATA_TEST_UTIL_H_
#define COHORT_WORKER_DATA_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "worker/data/dataset.h"

namespace cohort {

// Reads sample `index` of a class-label data set into `x` and returns its
// label; CHECK-fails if the read fails.
int32_t LabelOf(const Dataset& dataset, int64_t index, float* x);

// The data directory (the parent of mnist/ and cifar10-subset/): the value
// of COHORT_DATA_DIR when set, else the first "shared/data" found walking
// up from the real location of this test's source files (through the
// runfiles symlinks Bazel makes for `data` dependencies), of the test
// binary, and of the working directory. Empty when none is found.
std::string FindTestDataDir();

// A sentence for GTEST_SKIP() saying what was missing and how to provide it.
std::string MissingDataMessage(const std::string& what);

// A fresh, empty directory under TEST_TMPDIR (or /tmp); CHECK-fails if it
// cannot be made.
std::string MakeTempDir();

// Writes `bytes` to `path`, replacing it; CHECK-fails on error.
void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes);

// `raw` compressed as one gzip member.
std::vector<uint8_t> GzipBytes(const std::vector<uint8_t>& raw);

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_TEST_UTIL_H_

// Test helper: small data sets in the formats users bring (data kinds NUMPY,
// CSV and IMAGE_FOLDER), written by the test itself. Sample i has 20 features
// and the class i % 10 (learnable: feature i % 10 is raised by 2), the same in
// every format, so a test can compare formats or runs.
//
// Plain functions writing files; no state.
#ifndef COHORT_TESTS_OWN_DATA_H_
#define COHORT_TESTS_OWN_DATA_H_

#include <cstdint>
#include <string>

namespace cohort {

// Samples [first, first + n) as DIR/NAME_x.npy (float32 [n, 20]) and
// DIR/NAME_y.npy (int64 [n]).
void WriteNpySplit(const std::string& dir, const std::string& name,
                   int64_t first, int64_t n);

// Samples [first, first + n) as a CSV table at `path`: columns f0..f19,
// then "label".
void WriteCsv(const std::string& path, int64_t first, int64_t n);

// The `data { ... }` block of a NUMPY job over DIR/train0 (300 samples),
// DIR/train1 (212) and DIR/test (64), which it writes.
std::string NumpyDataBlock(const std::string& dir);

// The `data { ... }` block of a NUMPY job with float targets over
// DIR/train (512 samples) and DIR/test (64), which it writes: the inputs
// above, and targets of shape [10] that depend on them.
std::string NumpyRegressionBlock(const std::string& dir);
// The `data { ... }` block of an IMAGE_FOLDER job of 10 classes over
// DIR/train (52 JPEG and PNG images a class, 12x10 pixels) and DIR/val (6),
// which it writes; samples are 3 x 8 x 8 random crops.
std::string ImageFolderDataBlock(const std::string& dir);

}  // namespace cohort

#endif  // COHORT_TESTS_OWN_DATA_H_

// Properties every data set a reader accepts must have, shared by the MNIST
// and CIFAR-10 fuzz targets.
#ifndef COHORT_FUZZ_DATASET_CHECKS_H_
#define COHORT_FUZZ_DATASET_CHECKS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/tensor.h"
#include "worker/data/dataset.h"

namespace cohort {
namespace fuzz {

// `splits` holds a train and a test set of `shape` samples and 10 classes,
// with the expected sizes; every sample (the first 64 of each set) reads
// back with a label in range and finite features.
void CheckSplits(const DataSplits& splits, const Shape& shape,
                 int64_t train_size, int64_t test_size);

// A reader's error: DATA_LOSS or NOT_FOUND (files missing or damaged),
// with a message that names `dir`.
void CheckReaderError(const absl::Status& s, absl::string_view dir);

// `bytes` wrapped as a gzip member (zlib), so a fuzzed payload can reach the
// parser behind ReadMaybeGzipped as well as the inflater itself.
std::string Gzip(absl::string_view bytes);

}  // namespace fuzz
}  // namespace cohort

#endif  // COHORT_FUZZ_DATASET_CHECKS_H_

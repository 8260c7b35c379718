// CIFAR-10 in its binary version: files of 3073-byte records (one label
// byte, then 1024 red, 1024 green and 1024 blue bytes, each 32x32
// row-major). Training data is whichever of data_batch_1..5.bin exist; the
// test split is test_batch.bin.
//
// Every file is validated (record size, label range) and errors name the
// file and what was expected. Thread safety: reentrant.
#ifndef COHORT_WORKER_DATA_CIFAR10_H_
#define COHORT_WORKER_DATA_CIFAR10_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "worker/data/dataset.h"

namespace cohort {

// The published per-channel constants (on x/255), in R, G, B order.
inline constexpr float kCifar10Means[3] = {0.4914f, 0.4822f, 0.4465f};
inline constexpr float kCifar10Stds[3] = {0.2470f, 0.2435f, 0.2616f};

// Loads both splits from `dir`, or from `dir`/cifar-10-batches-bin (the
// layout of the official archive) when `dir` holds none of the files.
// Samples are {3, 32, 32}, 10 classes. `train_limit` > 0 keeps at most that
// many training records.
absl::StatusOr<DataSplits> LoadCifar10(const std::string& dir, bool normalize,
                                       int64_t train_limit);

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_CIFAR10_H_

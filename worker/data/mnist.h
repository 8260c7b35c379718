// MNIST in its original IDX format (train-images-idx3-ubyte etc., each
// either gzipped with a ".gz" suffix or raw).
//
// Every file is validated (magic number, dimensions, size, label range,
// image/label counts) and errors name the file and what was expected.
// Thread safety: reentrant.
#ifndef COHORT_WORKER_DATA_MNIST_H_
#define COHORT_WORKER_DATA_MNIST_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "worker/data/dataset.h"

namespace cohort {

// The published normalisation constants (on x/255).
inline constexpr float kMnistMean = 0.1307f;
inline constexpr float kMnistStd = 0.3081f;

// Loads both splits from the four files in `dir`. Samples are {1, 28, 28},
// 10 classes. `train_limit` > 0 keeps at most that many training records.
absl::StatusOr<DataSplits> LoadMnist(const std::string& dir, bool normalize,
                                     int64_t train_limit);

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_MNIST_H_

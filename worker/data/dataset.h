// The data set interface the loader reads from, and the factory that builds
// a job's training and test splits from its DatasetSpec.
//
// A Dataset is read-only once built: its owner (the trainer, through
// DataSplits) keeps it alive while loaders read it, and Get() is thread-safe,
// since every loader thread of every local replica calls it concurrently.
#ifndef COHORT_WORKER_DATA_DATASET_H_
#define COHORT_WORKER_DATA_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "proto/job.pb.h"

namespace cohort {

class Dataset {
 public:
  virtual ~Dataset() = default;

  // Number of samples.
  virtual int64_t size() const = 0;

  // Per-sample shape without the batch dimension: {C, H, W}, {C, L} or {F}.
  virtual const Shape& sample_shape() const = 0;

  // Labels lie in [0, num_classes()).
  virtual int num_classes() const = 0;

  // Writes sample `index`'s features (float32, normalised unless the spec
  // says otherwise, laid out as sample_shape, channel-major) to `out`, which
  // has room for NumElements(sample_shape()) values, and returns its label.
  // `index` must lie in [0, size()).
  virtual int32_t Get(int64_t index, float* out) const = 0;
};

struct DataSplits {
  std::unique_ptr<Dataset> train;
  std::unique_ptr<Dataset> test;
};

// Builds both splits of `spec`. `dir_override` (the --data-dir flag) replaces
// spec.dir when non-empty; `job_seed` seeds a synthetic set whose own seed is
// unset. Errors (InvalidArgument for bad spec values, NotFound for missing
// files, DataLoss for malformed ones) name the field or file at fault.
absl::StatusOr<DataSplits> LoadDataset(const DatasetSpec& spec,
                                       const std::string& dir_override,
                                       uint64_t job_seed);

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_DATASET_H_

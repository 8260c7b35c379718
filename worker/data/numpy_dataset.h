// Data in NumPy .npy files (DatasetSpec kind NUMPY): the input and label
// (or float target) arrays of each split, memory-mapped, so memory holds
// only the pages being read, whatever the data set's size.
//
// Ownership: owns its arrays. Thread safety: immutable after construction,
// so Read() is thread-safe.
#ifndef COHORT_WORKER_DATA_NUMPY_DATASET_H_
#define COHORT_WORKER_DATA_NUMPY_DATASET_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "worker/data/dataset.h"
#include "worker/data/npy.h"

namespace cohort {

// Both splits of `spec` (kind NUMPY), paths relative to `dir`. Every file
// is checked against the spec before training: its dtype, its per-sample
// shape, the label count against the input count, and every label against
// numpy.classes. Errors name the file (and the sample index of a bad
// label).
absl::StatusOr<DataSplits> LoadNumpy(const DatasetSpec& spec,
                                     const std::string& dir);

class NumpyDataset : public Dataset {
 public:
  struct Shard {
    std::unique_ptr<NpyArray> x, y;
  };
  // `shards` checked by the caller (LoadNumpy); `limit` > 0 keeps only the
  // first `limit` samples.
  // `target_shape` empty: class labels in [0, classes).
  NumpyDataset(Shape sample_shape, Shape target_shape, int classes,
               std::vector<Shard> shards, int64_t limit);

  int64_t size() const override { return size_; }
  const Shape& sample_shape() const override { return shape_; }
  const Shape& target_shape() const override { return target_shape_; }
  int num_classes() const override { return classes_; }
  absl::Status Read(int64_t index, uint64_t draw,
                    SampleOut& out) const override;

 private:
  const Shape shape_;
  const Shape target_shape_;
  const int classes_;
  const int64_t sample_elements_;
  const int64_t target_elements_;
  std::vector<Shard> shards_;
  // starts_[i]: the index of shard i's first sample; one past the end last.
  std::vector<int64_t> starts_;
  int64_t size_ = 0;
};

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_NUMPY_DATASET_H_

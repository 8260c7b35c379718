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
#include <vector>

#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "proto/job.pb.h"

namespace cohort {

// Where Read() puts one sample.
struct SampleOut {
  // Room for NumElements(sample_shape()) floats.
  float* features = nullptr;
  // Room for NumElements(target_shape()) floats; used only by a data set
  // with float targets.
  float* target = nullptr;
  // Set by a data set with class labels: in [0, num_classes()).
  int32_t label = 0;
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  // Number of samples.
  virtual int64_t size() const = 0;

  // Per-sample shape without the batch dimension: {C, H, W}, {C, L} or {F}.
  virtual const Shape& sample_shape() const = 0;

  // Class labels lie in [0, num_classes()); 0 for a data set whose targets
  // are float tensors.
  virtual int num_classes() const = 0;

  // Empty for class labels; otherwise the per-sample shape of the float
  // targets (e.g. {1} for one regressed value, {K} for K binary labels).
  virtual const Shape& target_shape() const;
  bool float_targets() const { return !target_shape().empty(); }
  // A class per target element (the TOKENS data set: the next token at
  // each position, ids stored as floats): float targets and classes.
  bool token_targets() const { return float_targets() && num_classes() > 0; }

  // For samples that end in categorical row ids (the CRITEO data set: a
  // pair of floats per feature, EmbeddingBagSpec), the rows of each
  // feature's table, so that a model's embedding tables can be checked
  // against them before training; empty for every other data set.
  virtual const std::vector<int64_t>& categorical_rows() const;

  // Writes sample `index`'s features (float32, normalised unless the spec
  // says otherwise, laid out as sample_shape, channel-major) and its target
  // into `out`. `draw` seeds the sample's random augmentation; the loader
  // derives it from the epoch's sampler seed and the index, so a resumed
  // run replays the same crops. Data sets without augmentation ignore it.
  // `index` must lie in [0, size()). An error (DataLoss, naming the file)
  // means this sample cannot be read: a corrupt file found only now, since
  // a streamed data set does not decode every sample up front.
  virtual absl::Status Read(int64_t index, uint64_t draw,
                            SampleOut& out) const = 0;
};

// A data set of class labels whose samples cannot fail to read (held in
// memory, or checked whole when opened): implements Get() instead of
// Read().
class LabelledDataset : public Dataset {
 public:
  // Writes sample `index`'s features to `out` and returns its label.
  virtual int32_t Get(int64_t index, float* out) const = 0;

  absl::Status Read(int64_t index, uint64_t draw, SampleOut& out) const final;
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

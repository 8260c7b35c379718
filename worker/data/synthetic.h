// A learnable synthetic classification set, generated in code.
//
// Each class has a prototype drawn from N(0, 1) per element; a sample is
// prototype[label] + noise * N(0, 1), with its label drawn uniformly. Sample
// i is a pure function of (seed, split, i), so every process and every
// thread sees the same data without coordination, and the train and test
// splits share prototypes but not samples. A split is generated up front
// when it fits in kMaxMaterializedBytes (Get is then a copy) and generated
// on every Get otherwise; both give identical values.
//
// Ownership: owns its prototypes and any generated samples. Thread safety:
// immutable after construction, so Get() is thread-safe.
#ifndef COHORT_WORKER_DATA_SYNTHETIC_H_
#define COHORT_WORKER_DATA_SYNTHETIC_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/memory_estimate.h"
#include "common/tensor.h"
#include "proto/job.pb.h"
#include "worker/data/dataset.h"

namespace cohort {

struct SyntheticOptions {
  Shape shape = {1, 28, 28};
  int num_classes = 10;
  int64_t train_samples = 8192;
  int64_t test_samples = 2048;
  float noise = 1.0f;
  uint64_t seed = 0;
};

// Applies job.proto's defaults to unset (zero) fields and validates the
// rest; errors name the field, e.g. "data.synthetic.classes".
absl::StatusOr<SyntheticOptions> SyntheticOptionsFromSpec(
    const SyntheticSpec& spec, uint64_t job_seed);

class SyntheticDataset : public LabelledDataset {
 public:
  enum class Split { kTrain, kTest };

  // Splits above this many bytes of float32 features are not materialised
  // (the memory estimate counts the others: common/memory_estimate.h).
  static constexpr int64_t kMaxMaterializedBytes =
      kMaxMaterializedSyntheticBytes;

  // `options` must be valid (see SyntheticOptionsFromSpec).
  SyntheticDataset(const SyntheticOptions& options, Split split);

  int64_t size() const override { return size_; }
  const Shape& sample_shape() const override { return shape_; }
  int num_classes() const override { return num_classes_; }
  int32_t Get(int64_t index, float* out) const override;

  bool materialized() const { return !labels_.empty(); }

 private:
  // The definition of sample `index`; Get copies it when materialised.
  int32_t Generate(int64_t index, float* out) const;

  Shape shape_;
  int64_t features_;  // NumElements(shape_)
  int num_classes_;
  int64_t size_;
  float noise_;
  uint64_t sample_seed_;           // seed of this split's sample streams
  std::vector<float> prototypes_;  // [class][feature]
  std::vector<float> data_;        // [sample][feature] when materialised
  std::vector<int32_t> labels_;    // [sample] when materialised
};

// Both splits of `options` (valid).
DataSplits MakeSyntheticSplits(const SyntheticOptions& options);

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_SYNTHETIC_H_

// An in-memory image data set of raw uint8 pixels (MNIST, CIFAR-10),
// normalised on read.
//
// Keeping the raw bytes costs a quarter of the memory of float32 and the
// per-pixel normalisation is one table lookup, so Get() stays cheap.
//
// Ownership: owns its pixels and labels. Thread safety: immutable after
// construction (Truncate is for the builder only), so Get() is thread-safe.
#ifndef COHORT_WORKER_DATA_BYTE_IMAGE_DATASET_H_
#define COHORT_WORKER_DATA_BYTE_IMAGE_DATASET_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/tensor.h"
#include "worker/data/dataset.h"

namespace cohort {

class ByteImageDataset : public LabelledDataset {
 public:
  // `pixels` holds size() samples of NumElements(sample_shape) bytes each,
  // channel-major; `labels` one byte per sample, each < num_classes (the
  // caller validates both). Features are (x/255 - mean[c]) / std[c] per
  // channel c, or x/255 when `means` and `stds` are empty.
  ByteImageDataset(Shape sample_shape, int num_classes,
                   std::vector<uint8_t> pixels, std::vector<uint8_t> labels,
                   absl::Span<const float> means, absl::Span<const float> stds);

  // Keeps only the first `n` samples (no-op when n >= size()).
  void Truncate(int64_t n);

  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  const Shape& sample_shape() const override { return shape_; }
  int num_classes() const override { return num_classes_; }
  int32_t Get(int64_t index, float* out) const override;

 private:
  Shape shape_;
  int num_classes_;
  int64_t sample_bytes_;
  int64_t plane_;  // pixels per channel
  std::vector<uint8_t> pixels_;
  std::vector<uint8_t> labels_;
  std::vector<float> lut_;  // [channel][byte value] -> feature
};

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_BYTE_IMAGE_DATASET_H_

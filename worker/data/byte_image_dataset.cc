#include "worker/data/byte_image_dataset.h"

#include <utility>

#include "common/logging.h"

namespace cohort {

ByteImageDataset::ByteImageDataset(Shape sample_shape, int num_classes,
                                   std::vector<uint8_t> pixels,
                                   std::vector<uint8_t> labels,
                                   absl::Span<const float> means,
                                   absl::Span<const float> stds)
    : shape_(std::move(sample_shape)),
      num_classes_(num_classes),
      sample_bytes_(NumElements(shape_)),
      pixels_(std::move(pixels)),
      labels_(std::move(labels)) {
  CHECK_GE(shape_.size(), 1u);
  const int64_t channels = shape_.size() >= 2 ? shape_[0] : 1;
  plane_ = sample_bytes_ / channels;
  CHECK_EQ(static_cast<int64_t>(pixels_.size()),
           sample_bytes_ * static_cast<int64_t>(labels_.size()));
  CHECK(means.empty() || static_cast<int64_t>(means.size()) == channels);
  CHECK_EQ(means.size(), stds.size());
  lut_.resize(channels * 256);
  for (int64_t c = 0; c < channels; ++c) {
    const float mean = means.empty() ? 0.0f : means[c];
    const float inv_std = stds.empty() ? 1.0f : 1.0f / stds[c];
    for (int v = 0; v < 256; ++v) {
      lut_[c * 256 + v] = (static_cast<float>(v) / 255.0f - mean) * inv_std;
    }
  }
}

void ByteImageDataset::Truncate(int64_t n) {
  if (n >= size()) return;
  CHECK_GE(n, 0);
  labels_.resize(n);
  pixels_.resize(n * sample_bytes_);
  labels_.shrink_to_fit();
  pixels_.shrink_to_fit();
}

int32_t ByteImageDataset::Get(int64_t index, float* out) const {
  CHECK(index >= 0 && index < size()) << "sample index " << index;
  const uint8_t* px = pixels_.data() + index * sample_bytes_;
  const int64_t channels = sample_bytes_ / plane_;
  for (int64_t c = 0; c < channels; ++c) {
    const float* lut = lut_.data() + c * 256;
    const uint8_t* src = px + c * plane_;
    float* dst = out + c * plane_;
    for (int64_t i = 0; i < plane_; ++i) dst[i] = lut[src[i]];
  }
  return labels_[index];
}

}  // namespace cohort

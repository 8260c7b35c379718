#include "worker/data/synthetic.h"

#include <cmath>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "worker/data/splitmix.h"

namespace cohort {
namespace {

// Keeps one sample's prototype table and buffers sane.
constexpr int64_t kMaxFeatures = int64_t{1} << 24;

// Stream tags, so that prototypes and the two splits never share a stream.
constexpr uint64_t kPrototypeTag = 0x70726f746f747970ULL;
constexpr uint64_t kTrainTag = 0x747261696e696e67ULL;
constexpr uint64_t kTestTag = 0x7465737473706c74ULL;

uint64_t Mix(uint64_t z) { return SplitMix64Mix(z); }

// SplitMix64 with Marsaglia's polar method: one word of state (a stream
// per sample), fast, and the same on every platform.
class SampleRng {
 public:
  explicit SampleRng(uint64_t seed) : rng_(seed) {}

  // Uniform in [0, n) (bias below n / 2^32, irrelevant here).
  int32_t Below(int32_t n) {
    return static_cast<int32_t>(
        ((rng_.Next() >> 32) * static_cast<uint64_t>(n)) >> 32);
  }

  // Fills out[0..n) with N(0, 1) * scale + base[i] (base may be null).
  // Float arithmetic and one 64-bit draw per candidate pair (24-bit
  // uniforms) are plenty for synthetic noise and twice as fast as double.
  void Normals(int64_t n, float scale, const float* base, float* out) {
    constexpr float kUnit = 2.0f / 16777216.0f;  // 2^-23: [0, 2^24) -> [0, 2)
    int64_t i = 0;
    while (i < n) {
      float u, v, s;
      do {
        const uint64_t bits = rng_.Next();
        u = static_cast<float>(bits >> 40) * kUnit - 1.0f;
        v = static_cast<float>((bits >> 8) & 0xffffff) * kUnit - 1.0f;
        s = u * u + v * v;
      } while (s >= 1.0f || s == 0.0f);
      const float f = std::sqrt(-2.0f * std::log(s) / s);
      out[i] = u * f * scale + (base ? base[i] : 0.0f);
      if (++i < n) {
        out[i] = v * f * scale + (base ? base[i] : 0.0f);
        ++i;
      }
    }
  }

 private:
  SplitMix64 rng_;
};

absl::Status FieldError(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("data.synthetic.", field, " ", what, "."));
}

absl::Status CheckShape(const Shape& shape) {
  if (shape.empty() || shape.size() > 3) {
    return FieldError("shape", absl::StrCat("has ", shape.size(),
                                            " dimensions, expected 1 to 3"));
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] <= 0 || shape[i] > kMaxFeatures) {
      return FieldError(
          absl::StrCat("shape[", i, "]"),
          absl::StrCat("is ", shape[i], ", expected 1 to ", kMaxFeatures));
    }
  }
  if (NumElements(shape) > kMaxFeatures) {
    return FieldError("shape", absl::StrCat("has ", NumElements(shape),
                                            " elements per sample, more than ",
                                            kMaxFeatures));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SyntheticOptions> SyntheticOptionsFromSpec(
    const SyntheticSpec& spec, uint64_t job_seed) {
  SyntheticOptions o;
  if (spec.shape_size() > 0)
    o.shape.assign(spec.shape().begin(), spec.shape().end());
  absl::Status shape_ok = CheckShape(o.shape);
  if (!shape_ok.ok()) return shape_ok;
  if (spec.classes() < 0 || spec.classes() == 1) {
    return FieldError("classes", absl::StrCat("is ", spec.classes(),
                                              ", expected at least 2"));
  }
  if (spec.classes() > 0) o.num_classes = spec.classes();
  if (spec.train_samples() < 0) {
    return FieldError("train_samples",
                      absl::StrCat("is ", spec.train_samples(),
                                   ", expected > 0 (or 0 for 8192)"));
  }
  if (spec.train_samples() > 0) o.train_samples = spec.train_samples();
  if (spec.test_samples() < 0) {
    return FieldError("test_samples",
                      absl::StrCat("is ", spec.test_samples(),
                                   ", expected > 0 (or 0 for 2048)"));
  }
  if (spec.test_samples() > 0) o.test_samples = spec.test_samples();
  if (!std::isfinite(spec.noise()) || spec.noise() < 0) {
    return FieldError("noise", absl::StrCat("is ", spec.noise(),
                                            ", expected a finite value >= 0"));
  }
  if (spec.noise() > 0) o.noise = spec.noise();
  o.seed = spec.seed() != 0 ? spec.seed() : job_seed;
  return o;
}

SyntheticDataset::SyntheticDataset(const SyntheticOptions& options, Split split)
    : shape_(options.shape),
      features_(NumElements(options.shape)),
      num_classes_(options.num_classes),
      size_(split == Split::kTrain ? options.train_samples
                                   : options.test_samples),
      noise_(options.noise),
      sample_seed_(
          Mix(options.seed ^ (split == Split::kTrain ? kTrainTag : kTestTag))) {
  CHECK(CheckShape(shape_).ok()) << ShapeString(shape_);
  CHECK_GE(num_classes_, 1);
  CHECK_GE(size_, 0);
  prototypes_.resize(num_classes_ * features_);
  SampleRng(Mix(options.seed ^ kPrototypeTag))
      .Normals(num_classes_ * features_, 1.0f, nullptr, prototypes_.data());
  if (size_ * features_ * static_cast<int64_t>(sizeof(float)) >
      kMaxMaterializedBytes) {
    return;
  }
  data_.resize(size_ * features_);
  labels_.resize(size_);
  for (int64_t i = 0; i < size_; ++i) {
    labels_[i] = Generate(i, data_.data() + i * features_);
  }
}

int32_t SyntheticDataset::Generate(int64_t index, float* out) const {
  SampleRng rng(Mix(sample_seed_ + static_cast<uint64_t>(index)));
  const int32_t label = rng.Below(num_classes_);
  rng.Normals(features_, noise_, prototypes_.data() + label * features_, out);
  return label;
}

int32_t SyntheticDataset::Get(int64_t index, float* out) const {
  CHECK(index >= 0 && index < size_) << "sample index " << index;
  if (!materialized()) return Generate(index, out);
  std::memcpy(out, data_.data() + index * features_, features_ * sizeof(float));
  return labels_[index];
}

DataSplits MakeSyntheticSplits(const SyntheticOptions& options) {
  DataSplits splits;
  splits.train = std::make_unique<SyntheticDataset>(
      options, SyntheticDataset::Split::kTrain);
  splits.test = std::make_unique<SyntheticDataset>(
      options, SyntheticDataset::Split::kTest);
  return splits;
}

}  // namespace cohort

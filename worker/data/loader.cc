#include "worker/data/loader.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "worker/data/splitmix.h"

namespace cohort {
namespace {

const Dataset* NotNull(const Dataset* dataset) {
  CHECK(dataset != nullptr);
  return dataset;
}

bool IsInner(BatchLayout layout, const Shape& sample_shape) {
  return layout == BatchLayout::kBatchInner && sample_shape.size() >= 2;
}

// The batch tensor's shape for `n` samples.
Shape BatchShape(const Shape& sample, int64_t n, bool inner) {
  Shape shape;
  shape.reserve(sample.size() + 1);
  if (inner) {
    shape.push_back(sample[0]);
    shape.push_back(n);
    shape.insert(shape.end(), sample.begin() + 1, sample.end());
  } else {
    shape.push_back(n);
    shape.insert(shape.end(), sample.begin(), sample.end());
  }
  return shape;
}

// Whether `t` already has BatchShape(sample, n, inner); checked without
// building a Shape, so that a steady-state batch allocates nothing.
bool HasBatchShape(const Tensor& t, const Shape& sample, int64_t n,
                   bool inner) {
  if (t.rank() != static_cast<int>(sample.size()) + 1) return false;
  const int batch_axis = inner ? 1 : 0;
  for (int i = 0, j = 0; i < t.rank(); ++i) {
    if (i == batch_axis) {
      if (t.dim(i) != n) return false;
    } else if (t.dim(i) != sample[j++]) {
      return false;
    }
  }
  return true;
}

}  // namespace

Loader::Loader(const Dataset* dataset, std::vector<int64_t> indices,
               int64_t batch_size, bool drop_last, BatchLayout layout,
               int threads, int prefetch, const ReadOptions& read)
    : dataset_(NotNull(dataset)),
      indices_(std::move(indices)),
      batch_size_(batch_size),
      layout_(layout),
      num_batches_(
          drop_last ? static_cast<int64_t>(indices_.size()) / batch_size
                    : (static_cast<int64_t>(indices_.size()) + batch_size - 1) /
                          batch_size),
      sample_size_(NumElements(dataset_->sample_shape())),
      read_(read) {
  CHECK_GE(batch_size, 1);
  CHECK_GE(threads, 1);
  for (int64_t index : indices_) {
    CHECK(index >= 0 && index < dataset->size()) << "sample index " << index;
  }
  const int ring = std::max({prefetch, threads, 1});
  ring_.resize(ring);
  {
    absl::MutexLock lock(&mu_);
    ready_.assign(ring, 0);
  }
  const int64_t workers = std::min<int64_t>(threads, num_batches_);
  for (int64_t i = 0; i < workers; ++i) {
    threads_.emplace_back([this] { WorkerLoop(); });
  }
}

Loader::~Loader() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    cancelled_.store(true, std::memory_order_relaxed);
    changed_.SignalAll();
  }
  for (std::thread& t : threads_) t.join();
}

bool Loader::Next(Batch* batch) {
  absl::MutexLock lock(&mu_);
  if (consumed_ >= num_batches_) return false;
  const size_t slot = consumed_ % ring_.size();
  while (!ready_[slot]) changed_.Wait(&mu_);
  std::swap(*batch, ring_[slot]);
  ready_[slot] = 0;
  ++consumed_;
  changed_.SignalAll();
  return true;
}

void Loader::WorkerLoop() {
  std::vector<float> scratch;
  const int64_t ring = static_cast<int64_t>(ring_.size());
  while (true) {
    int64_t b;
    {
      absl::MutexLock lock(&mu_);
      // Batch b may start once batch b - ring has left its slot.
      while (!stop_ && next_claim_ < num_batches_ &&
             next_claim_ >= consumed_ + ring) {
        changed_.Wait(&mu_);
      }
      if (stop_ || next_claim_ >= num_batches_) return;
      b = next_claim_++;
    }
    Fill(b, &ring_[b % ring], &scratch);
    absl::MutexLock lock(&mu_);
    ready_[b % ring] = 1;
    changed_.SignalAll();
  }
}

// Reads sample `index`, or with read.skip_bad_samples the first readable
// one after it (wrapping), into `out`; counts replaced samples in *skipped.
absl::Status ReadSample(const Dataset& dataset, int64_t index,
                        const ReadOptions& read, SampleOut& out,
                        int64_t* skipped) {
  const int64_t n = dataset.size();
  absl::Status first_error;
  for (int64_t tries = 0; tries < n; ++tries) {
    const int64_t i = (index + tries) % n;
    absl::Status s = dataset.Read(i, SplitMix64Mix(read.draw_seed ^ i), out);
    if (s.ok()) {
      if (tries > 0) ++*skipped;
      return absl::OkStatus();
    }
    if (!read.skip_bad_samples) return s;
    if (first_error.ok()) first_error = std::move(s);
    // A data set that is unreadable everywhere is not skipped forever.
    if (tries >= 1000) break;
  }
  return absl::DataLossError(absl::StrCat(
      "no readable sample at or after index ", index,
      " (skip_bad_samples); the first failure: ", first_error.message()));
}

void FillBatch(const Dataset& dataset, absl::Span<const int64_t> indices,
               BatchLayout layout, Batch* out, std::vector<float>* scratch,
               const std::atomic<bool>* cancelled, const ReadOptions& read) {
  const Shape& sample = dataset.sample_shape();
  const int64_t n = indices.size();
  const int64_t sample_size = NumElements(sample);
  const bool inner = IsInner(layout, sample);
  if (!HasBatchShape(out->features, sample, n, inner)) {
    out->features.Resize(BatchShape(sample, n, inner));
  }
  const bool floats = dataset.float_targets();
  const int64_t target_size = floats ? NumElements(dataset.target_shape()) : 0;
  if (floats) {
    out->labels.clear();
    if (!HasBatchShape(out->targets, dataset.target_shape(), n, false)) {
      out->targets.Resize(BatchShape(dataset.target_shape(), n, false));
    }
  } else {
    out->labels.resize(n);
  }
  out->skipped = 0;
  out->error = absl::OkStatus();
  float* data = out->features.data();
  if (inner) scratch->resize(sample_size);
  const int64_t channels = sample[0];
  const int64_t rest = sample_size / channels;
  for (int64_t k = 0; k < n; ++k) {
    if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) {
      return;
    }
    SampleOut sample_out;
    sample_out.features = inner ? scratch->data() : data + k * sample_size;
    if (floats) sample_out.target = out->targets.data() + k * target_size;
    out->error =
        ReadSample(dataset, indices[k], read, sample_out, &out->skipped);
    if (!out->error.ok()) return;
    if (!floats) out->labels[k] = sample_out.label;
    if (!inner) continue;
    // {C, N, rest}: channel c of sample k is row (c, k).
    for (int64_t c = 0; c < channels; ++c) {
      std::memcpy(data + (c * n + k) * rest, scratch->data() + c * rest,
                  rest * sizeof(float));
    }
  }
}

void Loader::Fill(int64_t b, Batch* out, std::vector<float>* scratch) const {
  const int64_t first = b * batch_size_;
  const int64_t n = std::min<int64_t>(
      batch_size_, static_cast<int64_t>(indices_.size()) - first);
  out->step_in_epoch = b;
  FillBatch(*dataset_, absl::MakeConstSpan(indices_.data() + first, n), layout_,
            out, scratch, &cancelled_, read_);
}

}  // namespace cohort

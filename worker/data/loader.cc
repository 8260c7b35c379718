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

// Copies one sample of `size` elements in `channels` rows from `from` into
// position k of an n-sample batch laid out {C, N, rest}.
void ScatterInner(const float* from, int64_t size, int64_t channels, int64_t k,
                  int64_t n, float* to) {
  const int64_t rest = size / channels;
  for (int64_t c = 0; c < channels; ++c) {
    std::memcpy(to + (c * n + k) * rest, from + c * rest, rest * sizeof(float));
  }
}

// Gives `t` the shape of an n-sample batch of `sample`, allocating only
// when that shape changes.
void ShapeBatch(const Shape& sample, int64_t n, bool inner, Tensor* t) {
  if (!HasBatchShape(*t, sample, n, inner))
    t->Resize(BatchShape(sample, n, inner));
}

void FillBatch(const Dataset& dataset, absl::Span<const int64_t> indices,
               BatchLayout layout, Batch* out, std::vector<float>* scratch,
               const std::atomic<bool>* cancelled, const ReadOptions& read) {
  const Shape& sample = dataset.sample_shape();
  const Shape& target = dataset.target_shape();
  const int64_t n = indices.size();
  const int64_t sample_size = NumElements(sample);
  const bool floats = dataset.float_targets();
  const int64_t target_size = floats ? NumElements(target) : 0;
  // Targets of rank >= 2 take the features' layout, which is the model's
  // output layout too, so losses compare them element by element.
  const bool inner = IsInner(layout, sample);
  const bool inner_target = floats && IsInner(layout, target);
  ShapeBatch(sample, n, inner, &out->features);
  if (floats) {
    out->labels.clear();
    ShapeBatch(target, n, inner_target, &out->targets);
    out->inner_targets = inner_target;
  } else {
    out->labels.resize(n);
  }
  out->skipped = 0;
  out->error = absl::OkStatus();
  if (inner || inner_target) scratch->resize(sample_size + target_size);
  for (int64_t k = 0; k < n; ++k) {
    if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) {
      return;
    }
    SampleOut s;
    s.features =
        inner ? scratch->data() : out->features.data() + k * sample_size;
    if (floats) {
      s.target = inner_target ? scratch->data() + sample_size
                              : out->targets.data() + k * target_size;
    }
    out->error = ReadSample(dataset, indices[k], read, s, &out->skipped);
    if (!out->error.ok()) return;
    if (!floats) out->labels[k] = s.label;
    if (inner) {
      ScatterInner(s.features, sample_size, sample[0], k, n,
                   out->features.data());
    }
    if (inner_target) {
      ScatterInner(s.target, target_size, target[0], k, n, out->targets.data());
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

// The background loader: decodes one replica's samples into batches on
// worker threads, ahead of the training loop.
//
// Batches are numbered 0..num_batches()-1 and handed out strictly in that
// order. Each thread claims the next unclaimed batch, decodes it into a slot
// of a ring of max(prefetch, threads) batch buffers, and marks it ready;
// Next() swaps the oldest ready slot with the caller's batch, so buffers
// circulate between the ring and the caller and steady state allocates
// nothing.
//
// Ownership: the loader owns its threads and the ring; it does not own the
// data set, which must outlive it. Thread safety: one consumer thread calls
// Next(); the worker threads are internal.
#ifndef COHORT_WORKER_DATA_LOADER_H_
#define COHORT_WORKER_DATA_LOADER_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "worker/data/dataset.h"

namespace cohort {

struct Batch {
  Tensor features;
  // One class label per sample (a data set of classes), or, for a data set
  // with float targets, `targets` (laid out as `features` would be with
  // the target's shape: {N, T} for a flat target, {T0, N, T1...} in the
  // batch-inner layout) and `labels` left empty.
  std::vector<int32_t> labels;
  Tensor targets;
  int64_t step_in_epoch = 0;  // this batch's number within the epoch
  // Samples that failed to read and were replaced by the next readable one
  // (skip_bad_samples).
  int64_t skipped = 0;
  // Not OK when a sample failed to read (and skipping is off): the batch is
  // incomplete and training must stop with this error.
  absl::Status error;

  // Samples in the batch.
  int64_t size() const {
    if (!labels.empty() || targets.rank() == 0) return labels.size();
    return targets.rank() >= 2 && inner_targets ? targets.dim(1)
                                                : targets.dim(0);
  }
  bool inner_targets = false;  // targets laid out {T0, N, T1...}
};

// How samples are read into a batch.
struct ReadOptions {
  // Seeds the samples' random augmentation (the epoch's; see
  // Dataset::Read). Sample i draws from a mix of this and i.
  uint64_t draw_seed = 0;
  // A sample that fails to read is replaced by the next readable one in
  // index order (wrapping) and counted in Batch::skipped, instead of
  // failing the batch.
  bool skip_bad_samples = false;
};

enum class BatchLayout {
  kBatchOuter,  // {N, sample_shape...}
  kBatchInner,  // {C, N, rest...} for samples of rank >= 2 (the engine's
                // spatial layout, see worker/layers/layer.h), so the model
                // needs no transpose; same as kBatchOuter for rank 1
};

// Decodes the samples `indices` of `dataset` into `*batch` (resizing it
// only when its shape changes), in `layout`. `scratch` is a reusable
// buffer. Stops early, leaving the batch incomplete, once `*cancelled`
// (when given) is true, or at a sample that fails to read (batch->error)
// unless `read.skip_bad_samples`.
void FillBatch(const Dataset& dataset, absl::Span<const int64_t> indices,
               BatchLayout layout, Batch* batch, std::vector<float>* scratch,
               const std::atomic<bool>* cancelled = nullptr,
               const ReadOptions& read = {});

class Loader {
 public:
  // `indices`: this replica's samples for the epoch, in order. Batches hold
  // `batch_size` (>= 1) samples; the last one is smaller unless `drop_last`
  // drops it. `threads` (>= 1) decode in the background; up to
  // max(prefetch, threads) batches are decoded ahead of the consumer.
  Loader(const Dataset* dataset, std::vector<int64_t> indices,
         int64_t batch_size, bool drop_last, BatchLayout layout, int threads,
         int prefetch, const ReadOptions& read = {});
  ~Loader();  // stops and joins the threads promptly, even mid-epoch

  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  int64_t num_batches() const { return num_batches_; }

  // Blocks until the next batch is ready and swaps it into `*batch` (whose
  // old buffers the loader reuses); returns false after the last batch.
  // A batch whose samples failed to read carries the error (batch->error);
  // the caller stops there.
  bool Next(Batch* batch);

 private:
  void WorkerLoop();
  // Decodes batch number `b` into `out` (only this thread touches it).
  void Fill(int64_t b, Batch* out, std::vector<float>* scratch) const;

  const Dataset* const dataset_;
  const std::vector<int64_t> indices_;
  const int64_t batch_size_;
  const BatchLayout layout_;
  const int64_t num_batches_;
  const int64_t sample_size_;
  const ReadOptions read_;

  // Batch b lives in ring_[b % ring_.size()]. Not guarded: the claiming
  // worker owns a slot from claim until it sets ready_, Next() from then
  // until it clears ready_; mu_ orders the hand-overs.
  std::vector<Batch> ring_;
  std::atomic<bool> cancelled_{false};  // lets Fill() stop mid-batch

  absl::Mutex mu_;
  absl::CondVar changed_;  // a slot became ready or free, or stop_
  std::vector<char> ready_ ABSL_GUARDED_BY(mu_);  // per ring_ slot
  int64_t next_claim_ ABSL_GUARDED_BY(mu_) = 0;   // next batch to decode
  int64_t consumed_ ABSL_GUARDED_BY(mu_) = 0;     // batches handed out
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_LOADER_H_

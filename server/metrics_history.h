// What the coordinator's dashboard draws: the job's mean training loss and
// throughput over time, and every epoch's test accuracy, kept in memory
// for as long as the coordinator runs.
//
// Bounded whatever the job's length: the samples (one per Record call, i.e.
// per second) live in a buffer of `capacity`; when it is full every other
// sample is dropped and from then on only every other call is kept, so the
// buffer always spans the whole run at an ever coarser interval (a plain
// ring buffer would lose the start of the loss curve, its most telling
// part). Epoch accuracies are one entry per epoch, the oldest dropped past
// kMaxEpochs.
//
// Ownership and thread safety: a value owned by the coordinator server; all
// methods are thread-safe (the sampler thread records, RPC threads add
// results, HTTP threads read).
#ifndef COHORT_SERVER_METRICS_HISTORY_H_
#define COHORT_SERVER_METRICS_HISTORY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"

namespace cohort {

class MetricsHistory {
 public:
  static constexpr size_t kMaxEpochs = 10000;

  // `capacity` >= 2 samples; `start` is time 0 of the curves.
  explicit MetricsHistory(size_t capacity = 2048,
                          absl::Time start = absl::Now());

  // One sample of the running job, from the coordinator's status at `now`:
  // the newest step, the workers' mean loss (over those that have reported
  // one) and summed throughput; also each epoch's test accuracy that the
  // workers' progress reports. Nothing while the job is not RUNNING or no
  // worker has reported progress.
  void Record(const StatusResponse& status, absl::Time now = absl::Now());

  // A finished worker's epoch summaries (WorkerResult.epoch_results).
  void RecordResult(int rank, const WorkerResult& result,
                    absl::Time now = absl::Now());

  // {"interval_s": S, "t": [...], "step": [...], "loss": [...],
  //  "samples_per_s": [...], "epochs": [{"epoch": E, "test_accuracy": A,
  //  "t": T}, ...]}: seconds since start, one array entry per sample
  // (non-finite losses as null), epochs in order.
  std::string Json() const;

 private:
  struct Sample {
    double t;
    int64_t step;
    double loss;
    double samples_per_s;
  };
  struct EpochPoint {
    double accuracy;
    double t;
    int rank;  // whose value it is: the lowest rank's wins
  };
  void AddEpoch(int64_t epoch, double accuracy, int rank, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t capacity_;
  const absl::Time start_;
  mutable absl::Mutex mu_;
  std::vector<Sample> samples_ ABSL_GUARDED_BY(mu_);
  // Keep one Record call in `stride_`; `calls_` counts them.
  int64_t stride_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, EpochPoint> epochs_ ABSL_GUARDED_BY(mu_);  // from 1
};

}  // namespace cohort

#endif  // COHORT_SERVER_METRICS_HISTORY_H_

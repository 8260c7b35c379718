// How a worker combines its replicas' gradients with the rest of the job:
// one interface for every mode and device, so that the training loop
// (worker/training_loop.h) has no per-mode branches.
//
//   LocalExchange      one process: nothing leaves it; the engine averages
//                      its local replicas and runs the optimizer.
//   AllReduceExchange  all-reduce over Gloo while backward runs
//                      (allreduce_exchange.h); the engine runs the optimizer.
//   PsExchange         push to parameter-server shards while backward runs,
//                      pull the parameters back (ps_exchange.h); the shards
//                      run the optimizer.
//   The GPU engine's NCCL exchange lives with the engine
//   (worker/gpu/gpu_engine.cc): its buckets close on CUDA streams.
//
// A step: BeginStep, then RangeReady from backward's threads as gradient
// ranges become final, then Finish once backward is done everywhere.
//
// Thread safety: RangeReady may be called from every replica's thread at
// once; everything else from the training thread, outside backward.
#ifndef COHORT_WORKER_EXCHANGE_GRADIENT_EXCHANGE_H_
#define COHORT_WORKER_EXCHANGE_GRADIENT_EXCHANGE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace cohort {

struct ExchangeStep {
  int64_t clock =
      0;           // the step (all-reduce, SYNC shards) or round (SSP, ASYNC)
  double lr = 0;   // the shards' optimizer uses it
  int active = 1;  // local replicas taking part in this step
  // SSP and ASYNC: the run-wide number of the first data chunk, of `active`.
  int64_t first_chunk = 0;
};

// What the exchange moved since the last TakeStats().
struct ExchangeStats {
  int64_t bytes = 0;
  double comm_seconds = 0;  // time inside collectives (bus bandwidth), if known
};

class GradientExchange {
 public:
  virtual ~GradientExchange() = default;

  // True when this worker runs the optimizer on the combined gradient;
  // false when the shards do and Pull() brings the parameters back.
  virtual bool UpdatesLocally() const = 0;
  // True when Finish() leaves the mean over the local replicas in replica
  // 0's gradient; false when the engine has to average them itself.
  virtual bool CombinesLocalReplicas() const = 0;
  // Whether Finish() may change replica 0's gradient after backward wrote
  // it (a collective's mean does); when not, what the engine measures of the
  // gradient during backward still holds at the update.
  virtual bool ChangesGradients() const { return true; }

  // Once, before the first step. `param_sizes`: each parameter tensor's
  // length including its alignment padding (they tile the flat buffer).
  virtual absl::Status Setup(const std::vector<int64_t>& param_sizes) {
    (void)param_sizes;
    return absl::OkStatus();
  }
  virtual void BeginStep(const ExchangeStep& step) = 0;
  // Whether RangeReady wants calls at all (an engine may skip them).
  virtual bool WantsRanges() const { return true; }
  // Replica `replica`'s gradient from `offset` to the end is final.
  virtual void RangeReady(int replica, int64_t offset) = 0;
  // Waits until the step's gradient is combined (or pushed).
  virtual absl::Status Finish() = 0;
  // What the timeline calls the wait in Finish(), and whether it goes on
  // the step's lane (a collective the step waits for) or the buckets' lane
  // (a transfer of its own).
  virtual const char* finish_name() const { return "allreduce wait"; }
  virtual bool finish_on_bucket_lane() const { return false; }
  // The parameters for `clock` into the engine's parameters (PS only).
  virtual absl::Status Pull(int64_t clock) {
    (void)clock;
    return absl::OkStatus();
  }
  virtual ExchangeStats TakeStats() { return {}; }
  // What this rank's exchange carries from step to step (compression's
  // error feedback), for checkpoints and the next generation; empty when
  // nothing. LoadState takes it back before the step it was saved after.
  // CarriesState: whether there is any such state, without copying it.
  virtual bool CarriesState() const { return false; }
  virtual std::vector<float> SaveState() const { return {}; }
  virtual absl::Status LoadState(std::vector<float> state) {
    (void)state;
    return absl::OkStatus();
  }
};

// One process and no peers: nothing to exchange.
class LocalExchange : public GradientExchange {
 public:
  bool UpdatesLocally() const override { return true; }
  bool CombinesLocalReplicas() const override { return false; }
  bool ChangesGradients() const override { return false; }
  void BeginStep(const ExchangeStep&) override {}
  bool WantsRanges() const override { return false; }
  void RangeReady(int, int64_t) override {}
  absl::Status Finish() override { return absl::OkStatus(); }
};

}  // namespace cohort

#endif  // COHORT_WORKER_EXCHANGE_GRADIENT_EXCHANGE_H_

// The narrow part of training that differs between devices. The training
// loop (worker/training_loop.h) is written once over this interface; the
// CPU engine (worker/engine/cpu_engine.h) and the GPU engine
// (worker/gpu/gpu_engine.cc, in the GPU plugin) implement it.
//
// A step, as the loop drives it:
//   SeedStep(step)                dropout draws depend on (seed, replica,
//                                 step)
//   exchange.BeginStep(...)
//   ForwardBackward(plan, source, exchange)
//                                 every replica takes its plan.micro_batches
//                                 batches from `source`, runs forward, the
//                                 loss and backward on each, and tells
//                                 `exchange` as ranges of the summed
//                                 gradient become final
//   exchange.Finish()
//   Update(plan, ...) or exchange.Pull(...)
//   Results()                     each replica's loss, correct, seen
//
// An engine owns its replicas (one per CPU replica or GPU), their
// parameters, gradients, optimizer state and BatchNorm statistics. It
// borrows the data sets. Thread safety: one training thread calls it; an
// engine runs its replicas on threads of its own.
#ifndef COHORT_WORKER_ENGINE_DEVICE_ENGINE_H_
#define COHORT_WORKER_ENGINE_DEVICE_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/checkpoint.h"
#include "worker/data/dataset.h"
#include "worker/data/loader.h"
#include "worker/exchange/gradient_exchange.h"
#include "worker/objective.h"

namespace cohort {

// Where each local replica's batches come from (the loop's loaders, or the
// chunks of a shared epoch). Next() is called from replica r's thread.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Fills `batch` with replica r's next batch; false when it has none.
  virtual bool Next(int replica, Batch* batch) = 0;
  // Batches replica r takes this step when the plan says `planned`: fewer
  // where its share ends first (called before its first Next of a step).
  virtual int Batches(int replica, int planned) {
    (void)replica;
    return planned;
  }
};

struct StepPlan {
  int64_t step = 0;  // run-wide, counted from 0
  double lr = 0;
  int active = 1;  // local replicas taking part (the first `active`)
  // Whether another step of this epoch follows (an engine that stages the
  // next batch during this step needs to know).
  bool more = false;
  // Batches each replica takes this step (gradient accumulation; fewer than
  // the spec's count only at the end of an epoch). Their gradients are
  // summed weighted by their samples, and only the last one's backward
  // pass tells the exchange that ranges are ready.
  int micro_batches = 1;
};

// One replica's step.
struct ReplicaResult {
  double loss = 0;
  int64_t correct = 0;  // classification only
  int64_t seen = 0;     // samples
  int64_t skipped = 0;  // samples replaced (skip_bad_samples)
};

// Replica 0's time in the step's forward and backward and in waiting for
// its data, for the step-time breakdown.
struct StepTiming {
  double data_s = 0;
  double compute_s = 0;
};

class DeviceEngine {
 public:
  virtual ~DeviceEngine() = default;

  virtual int replicas() const = 0;
  virtual BatchLayout batch_layout() const = 0;
  virtual int64_t num_parameters() const = 0;

  // The exchange for this engine's gradients in its job (the
  // DistributedContext it was made with; none: a single process).
  // UNIMPLEMENTED, in one sentence, for a mode the engine does not support.
  virtual absl::StatusOr<std::unique_ptr<GradientExchange>>
  CreateExchange() = 0;
  // Each parameter tensor's length including its alignment padding, in
  // order (they tile the flat parameter buffer).
  virtual std::vector<int64_t> ParamSizes() const = 0;

  virtual void SeedStep(int64_t step) = 0;
  virtual absl::Status ForwardBackward(const StepPlan& plan,
                                       BatchSource& source,
                                       GradientExchange& exchange) = 0;
  // After exchange.Finish(), when the exchange updates locally: averages
  // the local replicas unless the exchange did, checks that the gradient
  // is finite and, if it is, applies the optimizer. Returns whether it did.
  virtual absl::StatusOr<bool> Update(const StepPlan& plan,
                                      bool combine_local) = 0;
  // The step's results, replicas [0, plan.active); after Update or Pull.
  // Valid until the next step (engine-owned: no allocation per step).
  virtual absl::Span<const ReplicaResult> Results(const StepPlan& plan) = 0;
  virtual StepTiming timing() const = 0;
  // The L2 norm of the last step's combined gradient before clipping
  // (after Update); -1 where the engine does not compute it.
  virtual double grad_norm() const { return -1; }

  // Evaluates the test set. With `across_workers`, every replica of the
  // job takes its share, BatchNorm statistics are averaged over the job
  // first, and the sums (and the scores, when the objective keeps them)
  // are the job's; otherwise this worker's replicas share the whole test
  // set among themselves.
  virtual absl::StatusOr<EvalSums> Evaluate(const Dataset& test,
                                            bool across_workers) = 0;

  // The training state as named tensors: "params", "optimizer.K" (each
  // optimizer state tensor over the whole flat buffer, or a counter) and
  // "buffer.I" (BatchNorm statistics), laid out as StateLayout() says, so
  // that a checkpoint does not depend on the device or replica count.
  virtual std::vector<std::pair<std::string, int64_t>> StateLayout() const = 0;
  // What those tensors are, for tools outside cohort (model_state.h,
  // StateNamesJson): each parameter's PyTorch-style name, shape and offset
  // into "params", and each buffer's name.
  virtual std::string StateNames() const = 0;
  virtual absl::StatusOr<std::vector<CheckpointTensor>> CaptureState() = 0;
  // `flat`: the tensors of StateLayout() back to back.
  virtual absl::Status RestoreState(const std::vector<float>& flat) = 0;
  // The flat parameters (as the CPU model stores them).
  virtual absl::StatusOr<std::vector<float>> Parameters() = 0;
};

}  // namespace cohort

#endif  // COHORT_WORKER_ENGINE_DEVICE_ENGINE_H_

// What a job's processes will hold in memory, estimated from its spec
// before anything is allocated, and the one-line refusal when that does not
// fit the machine.
//
// The estimate counts the large buffers whose sizes the spec decides: per
// layer, the parameters with their gradients and optimizer state, and the
// activations a batch leaves behind; the data set where it is held in
// memory; the sampler's indices; the loader's batches. It leaves out what
// is small or hard to predict (convolution scratch, per-layer caches, the
// libraries' own memory), so it is a lower bound: a job it refuses could
// not have run, and sizes computed here in checked arithmetic (64-bit
// overflow is "more than 8 EiB", never a wrap) can be trusted by the
// allocations that follow.
//
// Where each counted buffer lives, so that this model of the worker stays
// true: the flat parameter and gradient buffers (worker/layers/param_store.h;
// CPU replicas share the values and own their gradients), the optimizer
// state (kernels/update_rules.h: SGD with momentum keeps one buffer, Adam
// two), the activations (worker/model.h keeps each layer's output and two
// gradient buffers; evaluation runs the same model on its own batch size),
// the synthetic data set (worker/data/synthetic.h), the sampler
// (worker/data/sampler.h: the epoch's permutation and each replica's share,
// 8 bytes an index) and the loader (worker/data/loader.h: a ring of
// max(prefetch, loader_threads) batches per replica).
//
// Thread safety: all functions are pure and may be called concurrently.
#ifndef COHORT_COMMON_MEMORY_ESTIMATE_H_
#define COHORT_COMMON_MEMORY_ESTIMATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/checked_int.h"
#include "common/machine_memory.h"
#include "common/model_sizes.h"
#include "proto/job.pb.h"

namespace cohort {

// Synthetic splits of up to this many bytes of float32 features are
// generated up front and held in memory; larger ones are generated sample
// by sample on every read (worker/data/synthetic.h).
inline constexpr int64_t kMaxMaterializedSyntheticBytes = int64_t{256} << 20;

// One counted buffer (or group of buffers of one layer or one data set).
struct MemoryPart {
  // What needs it and how much, for messages: "layer 1 (linear) needs
  // 585.0 GiB of parameters (78500000000 parameters: values, gradients)".
  std::string what;
  CheckedInt bytes;
};

struct MemoryEstimate {
  std::vector<MemoryPart> parts;
  CheckedInt total;  // their sum

  // The part with the most bytes (an overflowed one first); the estimate
  // must have parts.
  const MemoryPart& Largest() const;
};

// What the spec does not say about a worker process.
struct WorkerMemoryOptions {
  int replicas = 1;  // local CPU replicas, or GPUs
  // Replicas are GPUs: the host holds one CPU copy of the model (values
  // and gradients) and no activations; device memory is not counted here.
  bool gpus = false;
  // Replicas over the whole job (the sampler deals the data set out over
  // them); 0: `replicas` (a single process).
  int total_replicas = 0;
  // The process writes checkpoints: each capture copies the parameters and
  // the optimizer state.
  bool checkpoints = false;
  // The process runs a trained model forward instead of training it
  // (`cohort export`, `predict`, `evaluate`): no optimizer state and no
  // data set counted (the one split predict or evaluate reads is not);
  // `checkpoints` then counts the copy of the parameters it was read from.
  bool forward_only = false;
  // One replica's values and gradients are allocated already, outside the
  // memory the estimate is checked against (`cohort predict` copying a
  // loaded model): only the other replicas' gradients count.
  bool model_allocated = false;
};

// A worker (or `cohort train`) of `spec` whose model has `sizes`.
MemoryEstimate EstimateWorkerMemory(const JobSpec& spec,
                                    const ModelSizes& sizes,
                                    const WorkerMemoryOptions& options);

// A parameter-server shard of `spec` holding `elements` of the job's
// `total` parameters: the values, a push staging buffer, SYNC's gradient
// sum and the server-side optimizer's state.
MemoryEstimate EstimateShardMemory(const JobSpec& spec, int64_t elements,
                                   int64_t total);

// Adds `n` copies of `estimate` (e.g. one a worker), saying so in each
// part ("2 workers x ...").
MemoryEstimate Times(const MemoryEstimate& estimate, int n,
                     absl::string_view each);

// BytesString, or "more than 8 EiB" for an overflow.
std::string BytesString(CheckedInt bytes);

// InvalidArgument when the estimate passes 2^63 bytes, naming its largest
// part: sizes no machine has, whatever the run-time settings. For the spec
// validator.
absl::Status CheckNoOverflow(const MemoryEstimate& estimate);

// OK when `estimate` fits in `available`; otherwise FailedPrecondition,
// one line: "<the largest part>; <who> needs <total> in all and this
// machine has <bytes> available (<source>)". `who` is the subject, e.g.
// "this process" or "this job (2 workers)".
absl::Status CheckMemoryFits(const MemoryEstimate& estimate,
                             const AvailableMemory& available,
                             absl::string_view who);

}  // namespace cohort

#endif  // COHORT_COMMON_MEMORY_ESTIMATE_H_

// The GPU engine's internals (worker/gpu/gpu_engine.h is its interface):
// the CUDA events, input slots and per-GPU state, and the engine class,
// whose members are defined in gpu_engine.cc (setup, the step, the NCCL
// exchange), gpu_engine_loss.cc (the loss and its gradient) and
// gpu_engine_state.cc (evaluation, checkpoint state).
//
#ifndef COHORT_WORKER_GPU_GPU_ENGINE_IMPL_H_
#define COHORT_WORKER_GPU_GPU_ENGINE_IMPL_H_

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/kv_client.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_devices.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/memory.h"
#include "kernels/update_rules.h"
#include "worker/comm/buckets.h"
#include "worker/comm/nccl_communicator.h"
#include "worker/data/loader.h"
#include "worker/engine/device_engine.h"
#include "worker/engine/model_state.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/gpu_model.h"
#include "worker/model.h"
#include "worker/objective.h"
#include "worker/replica_pool.h"
#include "worker/trainer.h"

namespace cohort {
namespace gpu_engine {

// How a training step runs, per GPU (streams: compute = the context's,
// copy and comm = the Device's own; events in brackets):
//
//   copy     wait [consumed s] · upload batch k+1 into slot s · [uploaded s]
//   compute  wait [uploaded s'] · forward · loss · backward, recording
//            [bucket 0], [bucket 1], ... as gradient buckets close ·
//            [consumed s'] · wait [reduced] · scale · optimizer ·
//            copy the loss out · [step done]
//   comm     for each bucket b: wait [bucket b] · all-reduce b · ... ·
//            [reduced]
//
// The host enqueues step k's backward on every GPU (each GPU's thread),
// then issues each bucket's all-reduce, grouped over the local GPUs, from
// the trainer thread in bucket order (NCCL wants one thread to issue a
// collective for all of its GPUs); the events, not the host, hold each
// all-reduce back until its bucket is final, so communication overlaps the
// rest of backward. The host then enqueues the optimizer, loads batch k+1
// and starts its upload into the other slot, and only then blocks on
// [step done] for step k's loss, so loading and the copy overlap the GPU's
// work. Without NCCL (one GPU, one process) there is no comm stream and
// the optimizer follows backward directly.

// Device memory for `count` 4-byte values of any type.
template <typename T>
T* As(const DeviceFloats& d) {
  static_assert(sizeof(T) == sizeof(float) || sizeof(T) == 8);
  return reinterpret_cast<T*>(d.data());
}

// A CUDA event without timing, destroyed with the object. Move-only.
// Waiting for (or on) an event never recorded returns at once.
class Event {
 public:
  Event() = default;
  ~Event() { Reset(); }
  Event(Event&& other) noexcept
      : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&& other) noexcept {
    if (this != &other) {
      Reset();
      event_ = std::exchange(other.event_, nullptr);
    }
    return *this;
  }

  // On the calling thread's current device.
  static absl::StatusOr<Event> Create() {
    Event e;
    RETURN_IF_ERROR(
        CudaStatus(cudaEventCreateWithFlags(&e.event_, cudaEventDisableTiming),
                   "cudaEventCreate"));
    return e;
  }
  cudaEvent_t get() const { return event_; }

 private:
  void Reset() {
    if (event_ != nullptr) cudaEventDestroy(event_);
    event_ = nullptr;
  }
  cudaEvent_t event_ = nullptr;
};

inline absl::Status Record(const Event& e, cudaStream_t s,
                           absl::string_view what) {
  return CudaStatus(cudaEventRecord(e.get(), s),
                    absl::StrCat("cudaEventRecord (", what, ")"));
}

inline absl::Status StreamWait(cudaStream_t s, const Event& e,
                               absl::string_view what) {
  return CudaStatus(cudaStreamWaitEvent(s, e.get(), 0),
                    absl::StrCat("cudaStreamWaitEvent (", what, ")"));
}

// One of a GPU's two input slots: a batch's pinned staging buffers and its
// device copy (class labels, or float targets laid out {N, target...}). The
// host refills the staging buffers only after [uploaded] (the previous copy out
// of them is done); the copy stream overwrites the device copy only after
// [consumed] (the last step that read it is done).
struct Slot {
  PinnedBuffer<float> staged_features;
  PinnedBuffer<int32_t> staged_labels;
  PinnedBuffer<float> staged_targets;  // float targets only
  DeviceFloats input, labels, targets;
  Event uploaded;        // copy stream, after the batch's upload
  Event consumed;        // compute stream, after the last kernel reading it
  int64_t n = 0;         // samples it holds
  int64_t capacity = 0;  // samples it has room for
  int64_t skipped = 0;   // of them, replacements for unreadable samples
};

// What one GPU owns for the whole run.
struct Device {
  int ordinal = 0;
  std::unique_ptr<GpuContext> context;
  std::unique_ptr<GpuModel> model;
  Batch batch;  // host, NCHW
  std::optional<CudaStream> copy;
  Slot slots[2];
  int next_slot = 0;    // the slot the next Stage fills
  int ready_slot = -1;  // the slot holding the next step's batch, or -1
  // Per batch of the step: loss, squares, then correct as a float pair.
  PinnedBuffer<float> staged_result;
  Event step_done;  // compute stream, after the result copy
  // result: the loss, the gradient's sum of squares, the int64 correct
  // count, and scratch for a loss nobody reads (see LossOf).
  DeviceFloats grad_out, workspace, result, pair;
  DeviceFloats element_workspace;  // an elementwise loss's partial sums
  DeviceFloats reduce_workspace;   // the gradient's sum of squares
  DeviceFloats sequence_labels;    // int32 token targets (sequence loss)
  DeviceFloats momentum, adam_m, adam_v;
  // Gradient accumulation: the step's earlier batches' gradients, each times
  // its samples; their samples; every batch's samples this step.
  DeviceFloats accumulated;
  int64_t accumulated_samples = 0;
  std::vector<int64_t> batch_samples;
  DeviceFloats square_avg, grad_avg;  // RMSprop
  // LAMB/LARS: the piece table (int64 arrays, kernels/cuda/ops.h's
  // PieceTable) and its double sums, held in float buffers.
  DeviceFloats pieces, tensor_pieces, piece_sums, tensor_totals;
  int64_t capacity = 0;  // samples grad_out and the workspaces hold
  // With NCCL: the communication stream and this step's gradient buckets,
  // in backward order, each with its event on the compute stream.
  std::optional<CudaStream> comm;
  std::unique_ptr<BucketPlanner> planner;
  std::vector<GradientBucket> buckets;
  std::vector<Event> bucket_ready;
  Event reduced;  // comm stream, after the step's last all-reduce
  float loss = 0;
  float grad_squares = 0;  // this step's averaged gradient, for NaN/Inf
  int64_t correct = 0;
  int64_t seen = 0;
  int64_t skipped = 0;
};

class GpuEngine : public DeviceEngine {
 public:
  GpuEngine(const JobSpec& spec, const TrainOptions& options,
            const DataSplits& data)
      : spec_(spec),
        options_(options),
        dist_(options.distributed),
        data_(data),
        objective_(spec, *data.test),
        pool_(static_cast<int>(options.gpus.size())) {}

  absl::Status Setup();

  int replicas() const override { return Gpus(); }
  BatchLayout batch_layout() const override { return BatchLayout::kBatchOuter; }
  int64_t num_parameters() const override {
    return host_model_->num_parameters();
  }
  absl::StatusOr<std::unique_ptr<GradientExchange>> CreateExchange() override;
  std::vector<int64_t> ParamSizes() const override;
  void SeedStep(int64_t step) override;
  absl::Status ForwardBackward(const StepPlan& plan, BatchSource& source,
                               GradientExchange& exchange) override;
  absl::StatusOr<bool> Update(const StepPlan& plan,
                              bool combine_local) override;
  absl::Span<const ReplicaResult> Results(const StepPlan& plan) override;
  StepTiming timing() const override { return timing_; }
  // GPU 0's averaged gradient (every GPU holds the same after the
  // all-reduce).
  double grad_norm() const override {
    return std::sqrt(static_cast<double>(devices_[0].grad_squares));
  }
  absl::StatusOr<EvalSums> Evaluate(const Dataset& test,
                                    bool across_workers) override;
  std::vector<std::pair<std::string, int64_t>> StateLayout() const override;
  std::string StateNames() const override {
    return StateNamesJson(*host_model_);
  }
  absl::StatusOr<std::vector<CheckpointTensor>> CaptureState() override;
  absl::Status RestoreState(const std::vector<float>& flat) override;
  absl::StatusOr<std::vector<float>> Parameters() override;

  // From the training thread, as the NCCL exchange's Finish(): each
  // bucket's all-reduce over every GPU of the job on the comm streams,
  // after its event; then [reduced].
  absl::Status ReduceBuckets();

 private:
  int Gpus() const { return static_cast<int>(options_.gpus.size()); }
  int TotalReplicas() const {
    return dist_ != nullptr ? dist_->total_replicas : Gpus();
  }
  int GlobalReplica(int i) const {
    return (dist_ != nullptr ? dist_->replica_offset : 0) + i;
  }
  absl::Status CheckSupported() const;
  absl::Status CheckBf16(const CudaDevices& found) const;
  absl::Status SetupNccl();
  absl::Status SetupDevice(int i);
  absl::Status SetupOptimizerState(Device& d);
  // The comm stream, bucket planner and events of every GPU (NCCL only).
  absl::Status SetupBuckets();
  // Grows `slot` and the loss buffers to `n` samples.
  absl::Status Reserve(Device& d, Slot& slot, int64_t n);
  // Runs fn(i) on every GPU's thread, with that GPU current; the first error.
  absl::Status OnEveryGpu(const std::function<absl::Status(Device&)>& fn);
  // Host batch -> slot's pinned staging -> slot's device copy (copy stream).
  absl::Status Stage(Device& d, const Batch& b, int slot);
  // Takes the next training batch from the source and starts its upload
  // into a free slot.
  absl::Status Prefetch(Device& d);
  // Forward, loss and backward of the staged batch (queued); with NCCL,
  // records an event as each gradient bucket closes.
  absl::Status Launch(Device& d, int k, int batches);
  absl::Status FinishAccumulated(Device& d, int64_t begin, int64_t end);
  absl::Status BackwardInBuckets(Device& d);
  absl::Status CloseBucket(Device& d, const GradientBucket& b);
  // The job's loss (spec_.loss(), label_smoothing, huber_delta) of the last
  // forward into d.result, and its gradient into d.grad_out (queued).
  absl::Status LossOf(Device& d, const Slot& slot, bool gradient);
  absl::Status ElementwiseLossOf(Device& d, const Slot& slot, bool gradient);
  absl::Status SequenceLossOf(Device& d, const Slot& slot, bool gradient);
  // Sums `count` floats at per-GPU device pointers over every GPU of the job
  // on the compute streams, and waits (evaluation, BatchNorm statistics).
  absl::Status AllReduce(const std::function<float*(Device&)>& buffer,
                         int64_t count);
  absl::Status OptimizerStep(Device& d, double lr);
  absl::Status Clip(Device& d);
  // Queues the copy of the loss and correct count to the host, then
  // [step done]; TakeResult waits for it and reads them.
  absl::Status EnqueueResult(Device& d);
  absl::Status CopyResult(Device& d, int k);
  absl::Status TakeResult(Device& d);
  absl::Status AverageBuffers();
  absl::Status EvaluateOn(Device& d, const Dataset& test, EvalSums* sums);
  // Sums `count` host floats over the job's workers through the GPUs'
  // all-reduce, in place (the evaluation's score gathering).
  absl::Status AllReduceOverWorkers(float* data, int64_t count);
  // The optimizer's state tensors on `d`: device pointer and length.
  std::vector<std::pair<float*, int64_t>> OptimizerState(const Device& d) const;

  const JobSpec spec_;
  const TrainOptions options_;
  const DistributedContext* const dist_;
  const DataSplits& data_;
  const Objective objective_;  // the loss settings; evaluation's metrics
  ReplicaPool pool_;
  std::unique_ptr<Model<float>> host_model_;  // layout, init, state
  // Before devices_: their pinned buffers go back to it on destruction.
  std::unique_ptr<PinnedHostPool> pinned_;
  std::vector<Device> devices_;
  std::unique_ptr<InMemoryKv> local_kv_;
  std::unique_ptr<NcclCommunicator> own_nccl_;  // single process, > 1 GPU
  NcclCommunicator* nccl_ = nullptr;
  BatchSource* source_ = nullptr;  // the current epoch's, for Prefetch
  // The model's output elements per sample: the logits of class data, or
  // as many as a float target has.
  int64_t out_size_ = 0;
  int64_t target_size_ = 0;  // a float target's elements; 0 for labels
  // The sequence cross-entropy (CROSS_ENTROPY on float token
  // targets {L} with logits {V, L}): L, else 0.
  int64_t sequence_positions_ = 0;
  int64_t adam_steps_ = 0;
  // The flat buffer's tensors (weight decay exclusion, LAMB/LARS norms):
  // their pieces, and the runs the elementwise rules step.
  RuleLayout whole_layout_;
  std::vector<DecayRun> decay_runs_;
  std::vector<ReplicaResult> results_;  // Results()' storage, one a GPU
  StepTiming timing_;
};

}  // namespace gpu_engine
}  // namespace cohort

#endif  // COHORT_WORKER_GPU_GPU_ENGINE_IMPL_H_

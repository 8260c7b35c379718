#include "worker/gpu/gpu_trainer.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "client/kv_client.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/memory.h"
#include "kernels/cuda/ops.h"
#include "proto/coordinator.pb.h"
#include "worker/comm/nccl_communicator.h"
#include "worker/data/dataset.h"
#include "worker/data/loader.h"
#include "worker/data/sampler.h"
#include "worker/gpu/buckets.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/gpu_model.h"
#include "worker/optim/lr_schedule.h"
#include "worker/progress.h"
#include "worker/replica_pool.h"
#include "worker/zoo.h"

namespace cohort {
namespace {

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

double Seconds(absl::Time since) {
  return absl::ToDoubleSeconds(absl::Now() - since);
}

int64_t Product(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

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

absl::Status Record(const Event& e, cudaStream_t s, absl::string_view what) {
  return CudaStatus(cudaEventRecord(e.get(), s),
                    absl::StrCat("cudaEventRecord (", what, ")"));
}

absl::Status StreamWait(cudaStream_t s, const Event& e,
                        absl::string_view what) {
  return CudaStatus(cudaStreamWaitEvent(s, e.get(), 0),
                    absl::StrCat("cudaStreamWaitEvent (", what, ")"));
}

// One of a GPU's two input slots: a batch's pinned staging buffers and its
// device copy. The host refills the staging buffers only after [uploaded]
// (the previous copy out of them is done); the copy stream overwrites the
// device copy only after [consumed] (the last step that read it is done).
struct Slot {
  PinnedBuffer<float> staged_features;
  PinnedBuffer<int32_t> staged_labels;
  DeviceFloats input, labels;
  Event uploaded;        // copy stream, after the batch's upload
  Event consumed;        // compute stream, after the last kernel reading it
  int64_t n = 0;         // samples it holds
  int64_t capacity = 0;  // samples it has room for
};

// What one GPU owns for the whole run.
struct Device {
  int ordinal = 0;
  std::unique_ptr<GpuContext> context;
  std::unique_ptr<GpuModel> model;
  std::unique_ptr<Loader> loader;
  Batch batch;  // host, NCHW
  std::optional<CudaStream> copy;
  Slot slots[2];
  int next_slot = 0;    // the slot the next Stage fills
  int ready_slot = -1;  // the slot holding the next step's batch, or -1
  PinnedBuffer<float> staged_result;  // loss, then correct as a float pair
  Event step_done;                    // compute stream, after the result copy
  DeviceFloats grad_out, workspace, result, pair;
  DeviceFloats momentum, adam_m, adam_v;
  int64_t capacity = 0;  // samples grad_out and workspace hold
  // With NCCL: the communication stream and this step's gradient buckets,
  // in backward order, each with its event on the compute stream.
  std::optional<CudaStream> comm;
  std::unique_ptr<BucketPlanner> planner;
  std::vector<GradientBucket> buckets;
  std::vector<Event> bucket_ready;
  Event reduced;  // comm stream, after the step's last all-reduce
  float loss = 0;
  int64_t correct = 0;
  int64_t seen = 0;
};

class GpuTrainer : public Trainer {
 public:
  GpuTrainer(const JobSpec& spec, const TrainOptions& options)
      : spec_(spec),
        options_(options),
        dist_(options.distributed),
        pool_(static_cast<int>(options.gpus.size())) {}

  absl::Status Setup();
  absl::StatusOr<TrainResult> Run() override;

 private:
  int Gpus() const { return static_cast<int>(devices_.size()); }
  int TotalReplicas() const {
    return dist_ != nullptr ? dist_->total_replicas : Gpus();
  }
  int GlobalReplica(int i) const {
    return (dist_ != nullptr ? dist_->replica_offset : 0) + i;
  }
  absl::Status SetupDevice(int i);
  // The comm stream, bucket planner and events of every GPU (NCCL only).
  absl::Status SetupBuckets();
  // Grows `slot` and the loss buffers to `n` samples.
  absl::Status Reserve(Device& d, Slot& slot, int64_t n);
  // Runs fn(i) on every GPU's thread, with that GPU current; the first error.
  absl::Status OnEveryGpu(const std::function<absl::Status(Device&)>& fn);
  absl::Status StartEpoch(int64_t epoch);
  // Host batch -> slot's pinned staging -> slot's device copy (copy stream).
  absl::Status Stage(Device& d, const Batch& b, int slot);
  // Loads the next training batch and starts its upload into a free slot.
  absl::Status Prefetch(Device& d);
  // Forward, loss and backward of the staged batch (queued); with NCCL,
  // records an event as each gradient bucket closes.
  absl::Status Launch(Device& d);
  absl::Status BackwardInBuckets(Device& d);
  absl::Status CloseBucket(Device& d, const GradientBucket& b);
  // From the trainer thread: each bucket's all-reduce over every GPU of the
  // job on the comm streams, after its event; then [reduced].
  absl::Status ReduceBuckets();
  absl::Status LossOf(Device& d, const Slot& slot, bool gradient);
  // Sums `count` floats at per-GPU device pointers over every GPU of the job
  // on the compute streams, and waits (evaluation, BatchNorm statistics).
  absl::Status AllReduce(const std::function<float*(Device&)>& buffer,
                         int64_t count);
  absl::Status OptimizerStep(Device& d, double lr);
  // Queues the copy of the loss and correct count to the host, then
  // [step done]; TakeResult waits for it and reads them.
  absl::Status EnqueueResult(Device& d);
  absl::Status TakeResult(Device& d);
  absl::Status AverageBuffers();
  absl::StatusOr<EpochResult> TrainEpoch(int64_t epoch, Progress& progress);
  absl::Status Evaluate(EpochResult* result);
  absl::Status ReportStep(int64_t epoch, double loss);
  int64_t TotalSteps() const;

  const JobSpec spec_;
  const TrainOptions options_;
  const DistributedContext* const dist_;
  ReplicaPool pool_;
  DataSplits data_;
  std::unique_ptr<Model<float>> host_model_;  // layout, init, results
  // Before devices_: their pinned buffers go back to it on destruction.
  std::unique_ptr<PinnedHostPool> pinned_;
  std::vector<Device> devices_;
  std::unique_ptr<InMemoryKv> local_kv_;
  std::unique_ptr<NcclCommunicator> own_nccl_;  // single process, > 1 GPU
  NcclCommunicator* nccl_ = nullptr;
  int64_t classes_ = 0;
  int64_t steps_per_epoch_ = 1, epochs_ = 0, max_steps_ = 0, step_ = 0;
  int64_t adam_steps_ = 0;
  TrainResult result_;
  std::vector<double> recent_losses_;
  absl::Time last_report_ = absl::InfinitePast();
  absl::Time window_start_;
  int64_t window_samples_ = 0;
};

absl::Status GpuTrainer::Setup() {
  const absl::Time start = absl::Now();
  if (spec_.mode() == PS) {
    return absl::UnimplementedError(
        "parameter-server mode trains on CPU devices only (--devices=cpu:N)");
  }
  if (spec_.loss() != CROSS_ENTROPY) {
    return absl::UnimplementedError(
        "the GPU engine trains with cross-entropy only; MSE runs on CPU "
        "devices (--devices=cpu:N)");
  }
  const CudaDevices found = FindCudaDevices();
  for (int g : options_.gpus) {
    if (g < 0 || g >= static_cast<int>(found.names.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GPU ", g, " does not exist: this machine has ", found.names.size(),
          " CUDA device(s)",
          found.names.empty() ? absl::StrCat(" (", found.reason, ")") : ""));
    }
  }
  if (spec_.precision() == BF16) {
    for (int g : options_.gpus) {
      int major = 0, minor = 0;
      RETURN_IF_ERROR(CudaStatus(
          cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, g),
          "reading the compute capability"));
      RETURN_IF_ERROR(CudaStatus(
          cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, g),
          "reading the compute capability"));
      if (major < 8) {
        return absl::InvalidArgumentError(absl::StrCat(
            "precision: BF16 needs bf16 tensor cores (compute capability 8.0, "
            "A100 or newer); GPU ",
            g, " (", found.names[g], ") has ", major, ".", minor,
            ": train in FP32"));
      }
    }
  }
  ASSIGN_OR_RETURN(data_,
                   LoadDataset(spec_.data(), options_.data_dir, spec_.seed()));
  const Shape input = data_.train->sample_shape();
  ASSIGN_OR_RETURN(host_model_,
                   BuildModel<float>(spec_.model(), input, spec_.seed()));
  const Shape& out = host_model_->output_shape();
  if (out.size() != 1 || out[0] < data_.train->num_classes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model's output per sample is ", ShapeString(out),
                     " but cross-entropy over ", data_.train->num_classes(),
                     " classes needs [", data_.train->num_classes(), "]"));
  }
  classes_ = out[0];
  ASSIGN_OR_RETURN(pinned_, PinnedHostPool::Create());
  devices_.resize(options_.gpus.size());
  for (int i = 0; i < Gpus(); ++i) RETURN_IF_ERROR(SetupDevice(i));
  if (dist_ != nullptr && dist_->nccl != nullptr) {
    nccl_ = dist_->nccl;
  } else if (TotalReplicas() > 1) {
    // One process, several GPUs: communicators over them, bootstrapped
    // through an in-process store.
    local_kv_ = std::make_unique<InMemoryKv>();
    NcclTopology t;
    t.world_ranks = Gpus();
    t.devices = options_.gpus;
    ASSIGN_OR_RETURN(own_nccl_,
                     NcclCommunicator::Create(*local_kv_, t, NcclOptions()));
    nccl_ = own_nccl_.get();
  }
  if (nccl_ != nullptr) RETURN_IF_ERROR(SetupBuckets());
  DistributedSampler sampler(data_.train->size(), TotalReplicas(), 0,
                             spec_.seed(), true, spec_.drop_last());
  const int64_t b = spec_.batch_size();
  steps_per_epoch_ = std::max<int64_t>(
      1, spec_.drop_last() ? sampler.num_samples() / b
                           : (sampler.num_samples() + b - 1) / b);
  epochs_ = options_.epochs >= 0 ? options_.epochs : spec_.epochs();
  max_steps_ = options_.max_steps >= 0 ? options_.max_steps : spec_.max_steps();
  if (epochs_ <= 0 && max_steps_ <= 0) {
    return absl::InvalidArgumentError(
        "nothing to train: epochs and max_steps are both 0");
  }
  if (epochs_ <= 0)
    epochs_ = (max_steps_ + steps_per_epoch_ - 1) / steps_per_epoch_;
  result_.job_name = spec_.name();
  result_.model = spec_.model().zoo().empty() ? "custom" : spec_.model().zoo();
  result_.parameters = host_model_->num_parameters();
  result_.replicas = Gpus();
  result_.threads = Gpus();
  result_.setup_seconds = Seconds(start);
  window_start_ = absl::Now();
  return absl::OkStatus();
}

absl::Status GpuTrainer::SetupDevice(int i) {
  Device& d = devices_[i];
  d.ordinal = options_.gpus[i];
  ASSIGN_OR_RETURN(d.context, GpuContext::Create(d.ordinal));
  ASSIGN_OR_RETURN(
      d.model,
      GpuModel::Create(spec_.model(), data_.train->sample_shape(), *host_model_,
                       d.context.get(), spec_.precision()));
  d.model->SeedRandom(spec_.seed() + GlobalReplica(i));
  RETURN_IF_ERROR(d.context->Activate());
  const int64_t flat = d.model->flat_size();
  auto zeroed = [&](DeviceFloats& buffer) -> absl::Status {
    RETURN_IF_ERROR(buffer.Reserve(std::max<int64_t>(1, flat)));
    return CudaStatus(cudaMemset(buffer.data(), 0, flat * sizeof(float)),
                      "clearing optimizer state");
  };
  if (spec_.optimizer().kind() == OptimizerSpec::SGD) {
    if (spec_.optimizer().momentum() != 0) RETURN_IF_ERROR(zeroed(d.momentum));
  } else {
    RETURN_IF_ERROR(zeroed(d.adam_m));
    RETURN_IF_ERROR(zeroed(d.adam_v));
  }
  RETURN_IF_ERROR(d.result.Reserve(4));  // loss, pad, int64 correct
  RETURN_IF_ERROR(d.pair.Reserve(2));
  ASSIGN_OR_RETURN(d.staged_result,
                   PinnedBuffer<float>::Allocate(pinned_.get(), 4));
  ASSIGN_OR_RETURN(CudaStream copy, CudaStream::Create(d.ordinal));
  d.copy.emplace(std::move(copy));
  ASSIGN_OR_RETURN(d.step_done, Event::Create());
  for (Slot& slot : d.slots) {
    ASSIGN_OR_RETURN(slot.uploaded, Event::Create());
    ASSIGN_OR_RETURN(slot.consumed, Event::Create());
  }
  const int64_t largest =
      std::max(spec_.batch_size(), spec_.eval().batch_size());
  for (Slot& slot : d.slots) RETURN_IF_ERROR(Reserve(d, slot, largest));
  // Setup wrote device memory through the legacy default stream, which the
  // non-blocking streams do not wait for: finish it before they start.
  return CudaStatus(cudaDeviceSynchronize(), "finishing setup");
}

absl::Status GpuTrainer::SetupBuckets() {
  BucketBudget budget;
  const int64_t bytes =
      dist_ != nullptr ? dist_->bucket_bytes : spec_.cluster().bucket_bytes();
  if (bytes > 0) budget.bytes = bytes;
  for (Device& d : devices_) {
    RETURN_IF_ERROR(d.context->Activate());
    ASSIGN_OR_RETURN(CudaStream comm, CudaStream::Create(d.ordinal));
    d.comm.emplace(std::move(comm));
    ASSIGN_OR_RETURN(d.reduced, Event::Create());
    d.planner = std::make_unique<BucketPlanner>(d.model->flat_size(), budget);
  }
  return absl::OkStatus();
}

// The buffers are sized for the largest batch at setup, so this only
// allocates then; should a slot ever grow later, the GPU's streams are
// drained first, since queued work may still use the old buffers. The
// other slot, which may hold the next step's batch, is left alone.
absl::Status GpuTrainer::Reserve(Device& d, Slot& slot, int64_t n) {
  if (n <= slot.capacity && n <= d.capacity) return absl::OkStatus();
  RETURN_IF_ERROR(d.context->Synchronize());
  if (d.copy) RETURN_IF_ERROR(d.copy->Synchronize());
  if (n > slot.capacity) {
    const int64_t sample = Product(data_.train->sample_shape());
    RETURN_IF_ERROR(slot.input.Reserve(n * sample));
    RETURN_IF_ERROR(slot.labels.Reserve(n));
    ASSIGN_OR_RETURN(slot.staged_features,
                     PinnedBuffer<float>::Allocate(pinned_.get(), n * sample));
    ASSIGN_OR_RETURN(slot.staged_labels,
                     PinnedBuffer<int32_t>::Allocate(pinned_.get(), n));
    slot.capacity = n;
  }
  if (n > d.capacity) {
    RETURN_IF_ERROR(d.grad_out.Reserve(n * classes_));
    RETURN_IF_ERROR(
        d.workspace.Reserve(SoftmaxCrossEntropyWorkspaceBytes(n) / 4 + 2));
    d.capacity = n;
  }
  return absl::OkStatus();
}

absl::Status GpuTrainer::OnEveryGpu(
    const std::function<absl::Status(Device&)>& fn) {
  std::vector<absl::Status> status(devices_.size());
  pool_.Run([&](int i) {
    status[i] = devices_[i].context->Activate();
    if (status[i].ok()) status[i] = fn(devices_[i]);
  });
  for (const absl::Status& s : status) RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

int64_t GpuTrainer::TotalSteps() const {
  const int64_t by_epochs = epochs_ * steps_per_epoch_;
  return max_steps_ > 0 ? std::min(max_steps_, by_epochs) : by_epochs;
}

absl::Status GpuTrainer::StartEpoch(int64_t epoch) {
  uint64_t seed = spec_.seed();
  if (dist_ != nullptr) {
    ASSIGN_OR_RETURN(seed, dist_->epoch_seed(epoch));
  }
  const int threads = std::max(1, spec_.data().loader_threads());
  const int prefetch = std::max(1, spec_.data().prefetch());
  for (int i = 0; i < Gpus(); ++i) {
    DistributedSampler sampler(data_.train->size(), TotalReplicas(),
                               GlobalReplica(i), seed, true, spec_.drop_last());
    devices_[i].loader = std::make_unique<Loader>(
        data_.train.get(), sampler.Indices(epoch), spec_.batch_size(),
        spec_.drop_last(), BatchLayout::kBatchOuter, threads, prefetch);
  }
  return absl::OkStatus();
}

absl::Status GpuTrainer::Stage(Device& d, const Batch& b, int slot_index) {
  const int64_t n = static_cast<int64_t>(b.labels.size());
  const int64_t sample = Product(data_.train->sample_shape());
  if (static_cast<int64_t>(b.features.size()) != n * sample) {
    return absl::InternalError(
        absl::StrCat("GPU ", d.ordinal, ": a batch of ", n, " labels has ",
                     b.features.size(), " features, not ", n * sample));
  }
  Slot& slot = d.slots[slot_index];
  RETURN_IF_ERROR(Reserve(d, slot, n));
  RETURN_IF_ERROR(
      CudaStatus(cudaEventSynchronize(slot.uploaded.get()),
                 absl::StrCat("GPU ", d.ordinal,
                              ": the previous upload from slot ", slot_index)));
  std::memcpy(slot.staged_features.data(), b.features.data(),
              n * sample * sizeof(float));
  std::memcpy(slot.staged_labels.data(), b.labels.data(), n * sizeof(int32_t));
  const cudaStream_t s = d.copy->get();
  RETURN_IF_ERROR(StreamWait(s, slot.consumed, "an input slot is free"));
  RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(slot.input.data(), slot.staged_features.data(),
                      n * sample * sizeof(float), cudaMemcpyHostToDevice, s),
      "uploading a batch"));
  RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(slot.labels.data(), slot.staged_labels.data(),
                      n * sizeof(int32_t), cudaMemcpyHostToDevice, s),
      "uploading labels"));
  slot.n = n;
  return Record(slot.uploaded, s, "batch uploaded");
}

absl::Status GpuTrainer::Prefetch(Device& d) {
  if (!d.loader->Next(&d.batch)) {
    return absl::InternalError("a loader ended before num_batches()");
  }
  RETURN_IF_ERROR(Stage(d, d.batch, d.next_slot));
  d.ready_slot = d.next_slot;
  d.next_slot ^= 1;
  return absl::OkStatus();
}

// Mean cross-entropy of the last forward into d.result[0] and the count
// of correct predictions into d.result[2..3] (int64, cleared first).
absl::Status GpuTrainer::LossOf(Device& d, const Slot& slot, bool gradient) {
  const cudaStream_t s = d.context->stream();
  RETURN_IF_ERROR(
      CudaStatus(cudaMemsetAsync(d.result.data(), 0, 4 * sizeof(float), s),
                 "clearing the loss"));
  CudaCrossEntropyBuffers b;
  b.logits = d.model->output();
  b.labels = As<int32_t>(slot.labels);
  b.loss = d.result.data();
  b.grad = gradient ? d.grad_out.data() : nullptr;
  b.correct = reinterpret_cast<int64_t*>(d.result.data() + 2);
  b.workspace = d.workspace.data();
  b.workspace_bytes = d.workspace.capacity() * sizeof(float);
  return SoftmaxCrossEntropyAsync(b, slot.n, classes_, s);
}

absl::Status GpuTrainer::Launch(Device& d) {
  if (d.ready_slot < 0) {
    return absl::InternalError(
        absl::StrCat("GPU ", d.ordinal, ": no batch staged for the step"));
  }
  const Slot& slot = d.slots[d.ready_slot];
  d.ready_slot = -1;
  const cudaStream_t s = d.context->stream();
  RETURN_IF_ERROR(StreamWait(s, slot.uploaded, "the batch is on the GPU"));
  RETURN_IF_ERROR(
      d.model->Forward(slot.input.data(), slot.n, Mode::kTrain).status());
  RETURN_IF_ERROR(LossOf(d, slot, /*gradient=*/true));
  d.seen = slot.n;
  if (nccl_ != nullptr) {
    RETURN_IF_ERROR(BackwardInBuckets(d));
  } else {
    RETURN_IF_ERROR(d.model->Backward(d.grad_out.data()));
  }
  return Record(slot.consumed, s, "input slot read");
}

absl::Status GpuTrainer::BackwardInBuckets(Device& d) {
  d.planner->Reset();
  d.buckets.clear();
  absl::Status closing;
  auto close = [&](const std::optional<GradientBucket>& b) {
    if (b.has_value() && closing.ok()) closing = CloseBucket(d, *b);
  };
  RETURN_IF_ERROR(d.model->Backward(d.grad_out.data(), [&](int64_t offset) {
    close(d.planner->Ready(offset));
  }));
  close(d.planner->Finish());
  RETURN_IF_ERROR(d.planner->status());
  return closing;
}

absl::Status GpuTrainer::CloseBucket(Device& d, const GradientBucket& b) {
  const size_t k = d.buckets.size();
  if (k == d.bucket_ready.size()) {
    ASSIGN_OR_RETURN(Event e, Event::Create());
    d.bucket_ready.push_back(std::move(e));
  }
  RETURN_IF_ERROR(
      Record(d.bucket_ready[k], d.context->stream(), "gradient bucket final"));
  d.buckets.push_back(b);
  return absl::OkStatus();
}

absl::Status GpuTrainer::ReduceBuckets() {
  const std::vector<GradientBucket>& plan = devices_[0].buckets;
  for (const Device& d : devices_) {
    if (d.buckets != plan) {
      return absl::InternalError(absl::StrCat(
          "GPU ", d.ordinal, " closed ", d.buckets.size(),
          " gradient buckets, GPU ", devices_[0].ordinal, " ", plan.size(),
          ", or at other offsets: the replicas' models differ"));
    }
  }
  std::vector<float*> buffers(Gpus());
  std::vector<cudaStream_t> streams(Gpus());
  for (int i = 0; i < Gpus(); ++i) streams[i] = devices_[i].comm->get();
  for (size_t k = 0; k < plan.size(); ++k) {
    for (int i = 0; i < Gpus(); ++i) {
      Device& d = devices_[i];
      RETURN_IF_ERROR(StreamWait(streams[i], d.bucket_ready[k],
                                 "all-reduce after its bucket"));
      buffers[i] = d.model->grads() + plan[k].begin;
    }
    RETURN_IF_ERROR(nccl_->AllReduceSum(buffers, plan[k].size(), streams));
  }
  for (int i = 0; i < Gpus(); ++i) {
    RETURN_IF_ERROR(
        Record(devices_[i].reduced, streams[i], "gradients all-reduced"));
  }
  return absl::OkStatus();
}

absl::Status GpuTrainer::AllReduce(const std::function<float*(Device&)>& buffer,
                                   int64_t count) {
  if (nccl_ == nullptr) return absl::OkStatus();
  std::vector<float*> buffers;
  std::vector<cudaStream_t> streams;
  for (Device& d : devices_) {
    buffers.push_back(buffer(d));
    streams.push_back(d.context->stream());
  }
  RETURN_IF_ERROR(nccl_->AllReduceSum(buffers, count, streams));
  return nccl_->Wait();
}

absl::Status GpuTrainer::OptimizerStep(Device& d, double lr) {
  const int64_t n = d.model->flat_size();
  const cudaStream_t s = d.context->stream();
  if (nccl_ != nullptr) {
    RETURN_IF_ERROR(StreamWait(s, d.reduced, "the optimizer"));
  }
  if (TotalReplicas() > 1) {
    RETURN_IF_ERROR(
        gpu::ScaleInPlace(d.model->grads(), n, 1.0f / TotalReplicas(), s));
  }
  const OptimizerSpec& o = spec_.optimizer();
  if (o.kind() == OptimizerSpec::SGD) {
    gpu::SgdOptions so;
    so.momentum = o.momentum();
    so.weight_decay = o.weight_decay();
    so.nesterov = o.nesterov();
    return gpu::SgdStep(d.model->params(), d.model->grads(), d.momentum.data(),
                        n, lr, so, s);
  }
  gpu::AdamOptions ao;
  ao.beta1 = o.beta1();
  ao.beta2 = o.beta2();
  ao.eps = o.eps();
  ao.weight_decay = o.weight_decay();
  ao.decoupled = o.kind() == OptimizerSpec::ADAMW;
  return gpu::AdamStep(d.model->params(), d.model->grads(), d.adam_m.data(),
                       d.adam_v.data(), n, lr, adam_steps_, ao, s);
}

absl::Status GpuTrainer::EnqueueResult(Device& d) {
  const cudaStream_t s = d.context->stream();
  RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(d.staged_result.data(), d.result.data(),
                                 4 * sizeof(float), cudaMemcpyDeviceToHost, s),
                 "reading the loss"));
  return Record(d.step_done, s, "step done");
}

absl::Status GpuTrainer::TakeResult(Device& d) {
  RETURN_IF_ERROR(
      CudaStatus(cudaEventSynchronize(d.step_done.get()),
                 absl::StrCat("GPU ", d.ordinal, ": waiting for the step")));
  d.loss = d.staged_result.data()[0];
  std::memcpy(&d.correct, d.staged_result.data() + 2, sizeof(int64_t));
  return absl::OkStatus();
}

absl::StatusOr<EpochResult> GpuTrainer::TrainEpoch(int64_t epoch,
                                                   Progress& progress) {
  RETURN_IF_ERROR(StartEpoch(epoch));
  EpochResult er;
  er.epoch = epoch;
  double loss_sum = 0;
  int64_t correct = 0, seen = 0;
  const absl::Time start = absl::Now();
  const int64_t batches = devices_[0].loader->num_batches();
  // Whether a step follows `steps` steps of this epoch, `step` of the run.
  auto more = [&](int64_t steps, int64_t step) {
    return steps < batches && (max_steps_ <= 0 || step < max_steps_);
  };
  if (more(er.steps, step_)) {
    RETURN_IF_ERROR(OnEveryGpu([this](Device& d) { return Prefetch(d); }));
  }
  while (more(er.steps, step_)) {
    RETURN_IF_ERROR(OnEveryGpu([this](Device& d) { return Launch(d); }));
    if (nccl_ != nullptr) RETURN_IF_ERROR(ReduceBuckets());
    const double lr = LearningRate(spec_.optimizer(), spec_.lr_schedule(),
                                   step_, TotalSteps());
    ++adam_steps_;
    const bool next = more(er.steps + 1, step_ + 1);
    RETURN_IF_ERROR(OnEveryGpu([this, lr, next](Device& d) -> absl::Status {
      RETURN_IF_ERROR(OptimizerStep(d, lr));
      RETURN_IF_ERROR(EnqueueResult(d));
      // Load and upload the next batch while the GPU works on this step.
      if (next) RETURN_IF_ERROR(Prefetch(d));
      return TakeResult(d);
    }));
    // Every collective of the step is done by now (the optimizer waited for
    // them); this reports a communicator that failed or was aborted.
    if (nccl_ != nullptr) RETURN_IF_ERROR(nccl_->Wait());
    double loss = 0;
    for (const Device& d : devices_) {
      loss += d.loss / Gpus();
      correct += d.correct;
      seen += d.seen;
      result_.samples += d.seen;
      window_samples_ += d.seen;
    }
    loss_sum += loss;
    recent_losses_.push_back(loss);
    ++step_;
    ++er.steps;
    progress.Step(epoch, er.steps, steps_per_epoch_, step_, TotalSteps(),
                  result_.samples, loss);
    RETURN_IF_ERROR(ReportStep(epoch, loss));
  }
  er.seconds = Seconds(start);
  er.train_loss = er.steps > 0 ? loss_sum / er.steps : 0;
  er.train_accuracy = seen > 0 ? static_cast<double>(correct) / seen : 0;
  for (Device& d : devices_) d.loader.reset();
  return er;
}

// BatchNorm statistics averaged over every GPU of the job, so that all of
// them evaluate (and would save) the same model.
absl::Status GpuTrainer::AverageBuffers() {
  const size_t count = devices_[0].model->buffers().size();
  for (size_t k = 0; k < count; ++k) {
    const int64_t n = devices_[0].model->buffers()[k].second;
    RETURN_IF_ERROR(
        AllReduce([k](Device& d) { return d.model->buffers()[k].first; }, n));
    RETURN_IF_ERROR(OnEveryGpu([&](Device& d) {
      return gpu::ScaleInPlace(d.model->buffers()[k].first, n,
                               1.0f / TotalReplicas(), d.context->stream());
    }));
  }
  return absl::OkStatus();
}

// Every GPU evaluates its share of the test set, one batch at a time
// through the slot that holds no staged training batch; the sums are
// added up over every GPU of the job.
absl::Status GpuTrainer::Evaluate(EpochResult* result) {
  if (nccl_ != nullptr) RETURN_IF_ERROR(AverageBuffers());
  const int64_t n = data_.test->size();
  const int64_t total = TotalReplicas();
  const int64_t batch = spec_.eval().batch_size();
  RETURN_IF_ERROR(OnEveryGpu([&](Device& d) -> absl::Status {
    const int64_t g = GlobalReplica(&d - devices_.data());
    std::vector<int64_t> idx;
    for (int64_t i = n * g / total; i < n * (g + 1) / total; ++i) {
      idx.push_back(i);
    }
    Loader loader(data_.test.get(), std::move(idx), batch, false,
                  BatchLayout::kBatchOuter, 1, 2);
    double loss = 0;
    int64_t correct = 0;
    Batch b;
    const cudaStream_t s = d.context->stream();
    while (loader.Next(&b)) {
      const int slot_index = d.next_slot;
      const Slot& slot = d.slots[slot_index];
      RETURN_IF_ERROR(Stage(d, b, slot_index));
      RETURN_IF_ERROR(StreamWait(s, slot.uploaded, "the batch is on the GPU"));
      RETURN_IF_ERROR(
          d.model->Forward(slot.input.data(), slot.n, Mode::kEval).status());
      RETURN_IF_ERROR(LossOf(d, slot, /*gradient=*/false));
      RETURN_IF_ERROR(Record(slot.consumed, s, "input slot read"));
      RETURN_IF_ERROR(EnqueueResult(d));
      RETURN_IF_ERROR(TakeResult(d));
      loss += static_cast<double>(d.loss) * slot.n;
      correct += d.correct;
    }
    const float pair[2] = {static_cast<float>(loss),
                           static_cast<float>(correct)};
    // On the compute stream, which the all-reduce below follows (a legacy
    // stream copy would not be ordered with it). A pageable source is
    // staged before the call returns.
    return CudaStatus(cudaMemcpyAsync(d.pair.data(), pair, sizeof(pair),
                                      cudaMemcpyHostToDevice, s),
                      "evaluation sums");
  }));
  RETURN_IF_ERROR(AllReduce([](Device& d) { return d.pair.data(); }, 2));
  float sums[2];
  RETURN_IF_ERROR(devices_[0].context->Activate());
  RETURN_IF_ERROR(devices_[0].context->Synchronize());
  RETURN_IF_ERROR(CudaStatus(cudaMemcpy(sums, devices_[0].pair.data(),
                                        sizeof(sums), cudaMemcpyDeviceToHost),
                             "reading evaluation sums"));
  result->test_loss = n > 0 ? sums[0] / n : 0;
  result->test_accuracy = n > 0 ? sums[1] / n : 0;
  return absl::OkStatus();
}

absl::Status GpuTrainer::ReportStep(int64_t epoch, double loss) {
  if (dist_ == nullptr || !dist_->on_step) return absl::OkStatus();
  const absl::Time now = absl::Now();
  if (now - last_report_ < absl::Milliseconds(100)) return absl::OkStatus();
  last_report_ = now;
  WorkerProgress p;
  const double dt = Seconds(window_start_);
  FillProgress(step_, epoch, loss, dt > 0 ? window_samples_ / dt : 0, result_,
               &p);
  if (dt >= 1.0) {
    window_samples_ = 0;
    window_start_ = now;
  }
  return dist_->on_step(p);
}

absl::StatusOr<TrainResult> GpuTrainer::Run() {
  Progress progress(options_.live_progress, options_.quiet,
                    options_.log_every_seconds, spec_.batch_size());
  const absl::Time training_start = absl::Now();
  for (int64_t epoch = 0; epoch < epochs_; ++epoch) {
    if (max_steps_ > 0 && step_ >= max_steps_) break;
    ASSIGN_OR_RETURN(EpochResult er, TrainEpoch(epoch, progress));
    result_.train_seconds += er.seconds;
    ++result_.epochs;
    if (!spec_.eval().disable() && data_.test->size() > 0 &&
        (er.steps == steps_per_epoch_ || step_ == max_steps_)) {
      const absl::Time t = absl::Now();
      RETURN_IF_ERROR(Evaluate(&er));
      result_.eval_seconds += Seconds(t);
      result_.test_accuracy = er.test_accuracy;
      result_.test_loss = er.test_loss;
    }
    er.wall_seconds = Seconds(training_start);
    progress.EpochDone(er.epoch, er.train_loss, er.test_accuracy, er.seconds);
    result_.epoch_results.push_back(er);
  }
  FinishResult(step_, recent_losses_, &result_);
  if (options_.final_parameters != nullptr) {
    RETURN_IF_ERROR(devices_[0].context->Activate());
    RETURN_IF_ERROR(devices_[0].model->CopyToCpu(*host_model_));
    const BasicTensor<float>& p = host_model_->params();
    options_.final_parameters->assign(p.data(), p.data() + p.size());
  }
  return result_;
}

}  // namespace

absl::StatusOr<std::shared_ptr<NcclCommunicator>> CreateWorkerNccl(
    KvClient& kv, const std::string& key_prefix,
    const GpuWorkerPlacement& placement, const std::string& algorithm,
    absl::Duration timeout) {
  NcclOptions o;
  ASSIGN_OR_RETURN(o.algorithm, ParseNcclAlgorithm(algorithm));
  o.timeout = timeout;
  o.key_prefix = key_prefix;
  NcclTopology t;
  t.node_rank = placement.rank;
  t.num_nodes = placement.world_size;
  t.first_rank = placement.replica_offset;
  t.world_ranks = placement.total_replicas;
  t.devices = placement.gpus;
  ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> c,
                   NcclCommunicator::Create(kv, t, o));
  return std::shared_ptr<NcclCommunicator>(std::move(c));
}

absl::StatusOr<std::unique_ptr<Trainer>> CreateGpuTrainer(
    const JobSpec& spec, const TrainOptions& options) {
  if (options.gpus.empty()) {
    return absl::InvalidArgumentError("CreateGpuTrainer: no GPUs given");
  }
  auto trainer = std::make_unique<GpuTrainer>(spec, options);
  RETURN_IF_ERROR(trainer->Setup());
  return trainer;
}

}  // namespace cohort

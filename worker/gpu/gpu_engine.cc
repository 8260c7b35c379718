#include "worker/gpu/gpu_engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/elementwise_loss.h"
#include "kernels/cuda/grad_ops.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/memory.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/reduce.h"
#include "worker/engine/model_state.h"
#include "worker/gpu/gpu_engine_impl.h"
#include "worker/optim/optimizer.h"
#include "worker/zoo.h"

namespace cohort {
namespace gpu_engine {
namespace {

int64_t Product(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// The NCCL exchange: gradient buckets close on each GPU's compute stream
// during backward (events), and Finish() issues their all-reduces on the
// comm streams, which wait for those events; the optimizer waits for
// [reduced]. Nothing here blocks the host.
class NcclExchange : public GradientExchange {
 public:
  explicit NcclExchange(GpuEngine* engine) : engine_(engine) {}
  bool UpdatesLocally() const override { return true; }
  bool CombinesLocalReplicas() const override { return true; }
  void BeginStep(const ExchangeStep&) override {}
  bool WantsRanges() const override { return false; }
  void RangeReady(int, int64_t) override {}
  absl::Status Finish() override { return engine_->ReduceBuckets(); }

 private:
  GpuEngine* const engine_;
};

}  // namespace

absl::Status GpuEngine::CheckSupported() const {
  if (spec_.mode() == PS) {
    return absl::UnimplementedError(
        "parameter-server mode trains on CPU devices only (--devices=cpu:N)");
  }
  if (spec_.loss_weights_size() > 0 || spec_.has_ignore_index()) {
    return absl::UnimplementedError(
        "loss_weights and ignore_index run on CPU devices only "
        "(--devices=cpu:N); the GPU's cross-entropy kernel weighs every "
        "sample alike");
  }
  if (spec_.nonfinite_gradients() == NONFINITE_SKIP) {
    return absl::UnimplementedError(
        "nonfinite_gradients: NONFINITE_SKIP runs on CPU devices only (a GPU "
        "step's update is queued before its gradient is checked); on GPUs "
        "a NaN or infinite gradient fails the job");
  }
  if (spec_.optimizer().kind() == OptimizerSpec::ADAGRAD) {
    return absl::UnimplementedError(
        "optimizer ADAGRAD runs on CPU devices only (--devices=cpu:N) for "
        "now; on GPUs use SGD, ADAM, ADAMW, RMSPROP, LAMB or LARS");
  }
  return absl::OkStatus();
}

absl::Status GpuEngine::CheckBf16(const CudaDevices& found) const {
  if (spec_.precision() != BF16) return absl::OkStatus();
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
  return absl::OkStatus();
}

absl::Status GpuEngine::Setup() {
  RETURN_IF_ERROR(CheckSupported());
  const CudaDevices found = FindCudaDevices();
  for (int g : options_.gpus) {
    if (g < 0 || g >= static_cast<int>(found.names.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GPU ", g, " does not exist: this machine has ", found.names.size(),
          " CUDA device(s)",
          found.names.empty() ? absl::StrCat(" (", found.reason, ")") : ""));
    }
  }
  RETURN_IF_ERROR(CheckBf16(found));
  const Shape input = data_.train->sample_shape();
  ASSIGN_OR_RETURN(host_model_,
                   BuildModel<float>(spec_.model(), input, spec_.seed()));
  // Every loss and both kinds of targets, checked as the CPU engine checks
  // them, so that a job is refused the same way on either device.
  RETURN_IF_ERROR(objective_.CheckModelOutput(host_model_->output_shape()));
  out_size_ = Product(host_model_->output_shape());
  target_size_ =
      objective_.float_targets() ? Product(data_.train->target_shape()) : 0;
  if (spec_.loss() == CROSS_ENTROPY && target_size_ > 0) {
    // The sequence cross-entropy: logits {V, L} against L token ids.
    const Shape& out = host_model_->output_shape();
    if (out.size() != 2 || out[1] != target_size_) {
      return absl::InvalidArgumentError(
          absl::StrCat("cross_entropy on token targets of ", target_size_,
                       " positions needs logits {vocab, ", target_size_,
                       "} from the model, got ", ShapeString(out)));
    }
    sequence_positions_ = target_size_;
  }
  ASSIGN_OR_RETURN(pinned_, PinnedHostPool::Create());
  devices_.resize(options_.gpus.size());
  for (int i = 0; i < Gpus(); ++i) RETURN_IF_ERROR(SetupDevice(i));
  return SetupNccl();
}

absl::Status GpuEngine::SetupNccl() {
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
  return absl::OkStatus();
}

absl::Status GpuEngine::SetupDevice(int i) {
  Device& d = devices_[i];
  d.ordinal = options_.gpus[i];
  ASSIGN_OR_RETURN(d.context, GpuContext::Create(d.ordinal));
  ASSIGN_OR_RETURN(
      d.model,
      GpuModel::Create(spec_.model(), data_.train->sample_shape(), *host_model_,
                       d.context.get(), spec_.precision()));
  d.model->SeedRandom(spec_.seed() + GlobalReplica(i));
  RETURN_IF_ERROR(d.context->Activate());
  RETURN_IF_ERROR(SetupOptimizerState(d));
  // The loss, the gradient's sum of squares, the int64 correct count, and
  // a scratch loss (d.result's comment).
  RETURN_IF_ERROR(d.result.Reserve(6));
  RETURN_IF_ERROR(d.reduce_workspace.Reserve(static_cast<int64_t>(
      ReduceWorkspaceBytes(d.model->flat_size()) / 4 + 2)));
  RETURN_IF_ERROR(d.pair.Reserve(EvalSums::kCount));
  // One result block per accumulated batch (EnqueueResult).
  const int64_t batches = std::max(1, spec_.gradient_accumulation_steps());
  if (batches > 1) {
    RETURN_IF_ERROR(
        d.accumulated.Reserve(std::max<int64_t>(1, d.model->flat_size())));
  }
  ASSIGN_OR_RETURN(d.staged_result,
                   PinnedBuffer<float>::Allocate(pinned_.get(), 4 * batches));
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

absl::Status GpuEngine::SetupBuckets() {
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
absl::Status GpuEngine::Reserve(Device& d, Slot& slot, int64_t n) {
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
    if (target_size_ > 0) {
      RETURN_IF_ERROR(slot.targets.Reserve(n * target_size_));
      ASSIGN_OR_RETURN(
          slot.staged_targets,
          PinnedBuffer<float>::Allocate(pinned_.get(), n * target_size_));
    }
    slot.capacity = n;
  }
  if (n > d.capacity) {
    RETURN_IF_ERROR(d.grad_out.Reserve(n * out_size_));
    // The sequence loss has a cross-entropy row per position.
    const int64_t rows = n * std::max<int64_t>(1, sequence_positions_);
    RETURN_IF_ERROR(
        d.workspace.Reserve(SoftmaxCrossEntropyWorkspaceBytes(rows) / 4 + 2));
    if (sequence_positions_ > 0) {
      RETURN_IF_ERROR(d.sequence_labels.Reserve(rows));
    }
    RETURN_IF_ERROR(d.element_workspace.Reserve(
        ElementwiseLossWorkspaceBytes(n * out_size_) / 4 + 2));
    d.capacity = n;
  }
  return absl::OkStatus();
}

absl::Status GpuEngine::OnEveryGpu(
    const std::function<absl::Status(Device&)>& fn) {
  std::vector<absl::Status> status(devices_.size());
  pool_.Run([&](int i) {
    status[i] = devices_[i].context->Activate();
    if (status[i].ok()) status[i] = fn(devices_[i]);
  });
  for (const absl::Status& s : status) RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

absl::Status GpuEngine::Stage(Device& d, const Batch& b, int slot_index) {
  const int64_t n = b.size();
  const int64_t sample = Product(data_.train->sample_shape());
  if (static_cast<int64_t>(b.features.size()) != n * sample) {
    return absl::InternalError(
        absl::StrCat("GPU ", d.ordinal, ": a batch of ", n, " samples has ",
                     b.features.size(), " features, not ", n * sample));
  }
  if (static_cast<int64_t>(b.targets.size()) != n * target_size_ ||
      static_cast<int64_t>(b.labels.size()) != (target_size_ > 0 ? 0 : n)) {
    return absl::InternalError(absl::StrCat(
        "GPU ", d.ordinal, ": a batch of ", n, " samples has ", b.labels.size(),
        " labels and ", b.targets.size(), " target elements, expected ",
        target_size_ > 0 ? 0 : n, " and ", n * target_size_));
  }
  Slot& slot = d.slots[slot_index];
  RETURN_IF_ERROR(Reserve(d, slot, n));
  RETURN_IF_ERROR(
      CudaStatus(cudaEventSynchronize(slot.uploaded.get()),
                 absl::StrCat("GPU ", d.ordinal,
                              ": the previous upload from slot ", slot_index)));
  std::memcpy(slot.staged_features.data(), b.features.data(),
              n * sample * sizeof(float));
  // Class labels or float targets: a batch carries one or the other.
  const bool floats = target_size_ > 0;
  const int64_t target_bytes =
      floats ? n * target_size_ * sizeof(float) : n * sizeof(int32_t);
  void* staged_targets = floats ? static_cast<void*>(slot.staged_targets.data())
                                : static_cast<void*>(slot.staged_labels.data());
  std::memcpy(staged_targets,
              floats ? static_cast<const void*>(b.targets.data())
                     : static_cast<const void*>(b.labels.data()),
              target_bytes);
  const cudaStream_t s = d.copy->get();
  RETURN_IF_ERROR(StreamWait(s, slot.consumed, "an input slot is free"));
  RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(slot.input.data(), slot.staged_features.data(),
                      n * sample * sizeof(float), cudaMemcpyHostToDevice, s),
      "uploading a batch"));
  RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(floats ? slot.targets.data() : slot.labels.data(),
                      staged_targets, target_bytes, cudaMemcpyHostToDevice, s),
      floats ? "uploading targets" : "uploading labels"));
  slot.n = n;
  slot.skipped = b.skipped;
  return Record(slot.uploaded, s, "batch uploaded");
}

absl::Status GpuEngine::Prefetch(Device& d) {
  const int replica = static_cast<int>(&d - devices_.data());
  if (source_ == nullptr || !source_->Next(replica, &d.batch)) {
    return absl::InternalError("a batch source ended before its last step");
  }
  RETURN_IF_ERROR(d.batch.error);
  RETURN_IF_ERROR(Stage(d, d.batch, d.next_slot));
  d.ready_slot = d.next_slot;
  d.next_slot ^= 1;
  return absl::OkStatus();
}

// Batch `k` of the step's `batches`: forward, loss and backward (queued).
// Before the last batch the gradient joins d.accumulated (weighted by its
// samples) and its loss is copied out; the last one's backward finishes the
// step's mean gradient range by range, ahead of each bucket's all-reduce.
absl::Status GpuEngine::Launch(Device& d, int k, int batches) {
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
  if (k == 0) {
    d.seen = d.skipped = d.accumulated_samples = 0;
    d.batch_samples.clear();
  }
  d.seen += slot.n;
  d.skipped += slot.skipped;
  d.batch_samples.push_back(slot.n);
  if (k + 1 < batches) {
    RETURN_IF_ERROR(d.model->Backward(d.grad_out.data()));
    RETURN_IF_ERROR(gpu::AccumulateScaled(
        d.model->grads(), d.model->flat_size(), static_cast<float>(slot.n),
        k == 0, d.accumulated.data(), s));
    d.accumulated_samples += slot.n;
    RETURN_IF_ERROR(CopyResult(d, k));
  } else if (nccl_ != nullptr) {
    RETURN_IF_ERROR(BackwardInBuckets(d));
  } else {
    RETURN_IF_ERROR(d.model->Backward(d.grad_out.data()));
    RETURN_IF_ERROR(FinishAccumulated(d, 0, d.model->flat_size()));
  }
  return Record(slot.consumed, s, "input slot read");
}

// The step's mean gradient over [begin, end) once its last batch's is
// there (nothing without accumulation).
absl::Status GpuEngine::FinishAccumulated(Device& d, int64_t begin,
                                          int64_t end) {
  if (d.accumulated_samples == 0 || begin >= end) return absl::OkStatus();
  const int64_t last = d.batch_samples.back();
  return gpu::FinishAccumulated(
      d.accumulated.data() + begin, end - begin, static_cast<float>(last),
      1.0f / static_cast<float>(d.accumulated_samples + last),
      d.model->grads() + begin, d.context->stream());
}

absl::Status GpuEngine::BackwardInBuckets(Device& d) {
  d.planner->Reset();
  d.buckets.clear();
  absl::Status closing;
  int64_t end = d.model->flat_size();
  auto finish = [&](int64_t begin) {
    if (closing.ok()) closing = FinishAccumulated(d, begin, end);
    end = std::min(end, begin);
  };
  auto close = [&](const std::optional<GradientBucket>& b) {
    if (b.has_value() && closing.ok()) closing = CloseBucket(d, *b);
  };
  RETURN_IF_ERROR(d.model->Backward(d.grad_out.data(), [&](int64_t offset) {
    finish(offset);
    close(d.planner->Ready(offset));
  }));
  finish(0);
  close(d.planner->Finish());
  RETURN_IF_ERROR(d.planner->status());
  return closing;
}

absl::Status GpuEngine::CloseBucket(Device& d, const GradientBucket& b) {
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

absl::Status GpuEngine::ReduceBuckets() {
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

absl::Status GpuEngine::AllReduce(const std::function<float*(Device&)>& buffer,
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

// Batch k's loss and correct count (and, for the last, the gradient's
// sum of squares) into block k of the staged result.
absl::Status GpuEngine::CopyResult(Device& d, int k) {
  return CudaStatus(
      cudaMemcpyAsync(d.staged_result.data() + 4 * k, d.result.data(),
                      4 * sizeof(float), cudaMemcpyDeviceToHost,
                      d.context->stream()),
      "reading the loss");
}

absl::Status GpuEngine::EnqueueResult(Device& d) {
  const int last = static_cast<int>(d.batch_samples.size()) - 1;
  RETURN_IF_ERROR(CopyResult(d, std::max(0, last)));
  return Record(d.step_done, d.context->stream(), "step done");
}

// The step's loss over its batches, weighted by their samples as one larger
// batch's mean would be.
absl::Status GpuEngine::TakeResult(Device& d) {
  RETURN_IF_ERROR(
      CudaStatus(cudaEventSynchronize(d.step_done.get()),
                 absl::StrCat("GPU ", d.ordinal, ": waiting for the step")));
  const float* staged = d.staged_result.data();
  const int batches = std::max<int>(1, d.batch_samples.size());
  double loss = 0;
  d.correct = 0;
  for (int k = 0; k < batches; ++k) {
    const int64_t n = k < static_cast<int>(d.batch_samples.size())
                          ? d.batch_samples[k]
                          : d.seen;
    loss += static_cast<double>(staged[4 * k]) * n;
    int64_t correct = 0;
    std::memcpy(&correct, staged + 4 * k + 2, sizeof(int64_t));
    d.correct += correct;
  }
  // The sequence loss counts tokens; training accuracy counts samples, so
  // a language model reports per-token accuracy only when it evaluates
  // (as the CPU engine: worker/objective.cc).
  if (sequence_positions_ > 0) d.correct = 0;
  d.loss = d.seen > 0 ? static_cast<float>(loss / d.seen) : 0.0f;
  d.grad_squares = staged[4 * (batches - 1) + 1];
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GradientExchange>> GpuEngine::CreateExchange() {
  if (nccl_ != nullptr && spec_.compression().kind() != CompressionSpec::NONE) {
    return absl::UnimplementedError(
        "compression: GPU workers all-reduce float gradients over NCCL; "
        "compression runs on CPU workers (Gloo) only");
  }
  if (nccl_ != nullptr) return std::make_unique<NcclExchange>(this);
  return std::make_unique<LocalExchange>();
}

std::vector<int64_t> GpuEngine::ParamSizes() const {
  return PaddedParamSizes(*host_model_);
}

// Dropout on the GPU draws from its own generator, seeded per replica once
// (it agrees with the CPU engine in distribution only).
void GpuEngine::SeedStep(int64_t) {}

// Enqueues forward, loss and backward on every GPU (the first step of an
// epoch stages its batch first); the exchange's Finish() then issues the
// all-reduces.
absl::Status GpuEngine::ForwardBackward(const StepPlan& plan,
                                        BatchSource& source,
                                        GradientExchange&) {
  const absl::Time start = absl::Now();
  if (source_ != &source) {
    source_ = &source;
    for (Device& d : devices_) d.ready_slot = -1;
  }
  RETURN_IF_ERROR(OnEveryGpu([this, &plan](Device& d) -> absl::Status {
    const int replica = static_cast<int>(&d - devices_.data());
    const int batches = source_->Batches(replica, plan.micro_batches);
    for (int k = 0; k < batches; ++k) {
      if (d.ready_slot < 0) RETURN_IF_ERROR(Prefetch(d));
      RETURN_IF_ERROR(Launch(d, k, batches));
      // The step's next batch uploads while the GPU works on this one.
      if (k + 1 < batches) RETURN_IF_ERROR(Prefetch(d));
    }
    return absl::OkStatus();
  }));
  timing_.compute_s = absl::ToDoubleSeconds(absl::Now() - start);
  return absl::OkStatus();
}

// The optimizer after the all-reduce (the GPU's stream waits for it), then
// the next batch's upload while the GPU works, then the step's loss and the
// averaged gradient's sum of squares. The update is queued before the
// check's result is known (the GPU never waits for the host mid-step), so
// a non-finite gradient fails the step (nonfinite_gradients: FAIL) after
// it was applied; NONFINITE_SKIP is refused on GPUs at setup.
absl::StatusOr<bool> GpuEngine::Update(const StepPlan& plan, bool) {
  ++adam_steps_;
  const double lr = plan.lr;
  const bool next = plan.more;
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
  return std::all_of(devices_.begin(), devices_.end(), [](const Device& d) {
    return std::isfinite(d.grad_squares);
  });
}

absl::Span<const ReplicaResult> GpuEngine::Results(const StepPlan&) {
  results_.resize(devices_.size());
  for (size_t i = 0; i < devices_.size(); ++i) {
    const Device& d = devices_[i];
    results_[i] = {d.loss, d.correct, d.seen, d.skipped};
  }
  return results_;
}

}  // namespace gpu_engine

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

absl::StatusOr<std::unique_ptr<DeviceEngine>> CreateGpuEngine(
    const JobSpec& spec, const TrainOptions& options, const DataSplits& data) {
  if (options.gpus.empty()) {
    return absl::InvalidArgumentError("CreateGpuEngine: no GPUs given");
  }
  auto engine = std::make_unique<gpu_engine::GpuEngine>(spec, options, data);
  RETURN_IF_ERROR(engine->Setup());
  return engine;
}

}  // namespace cohort

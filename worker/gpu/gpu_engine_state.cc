// The GPU engine's evaluation and checkpoint state (gpu_engine_impl.h).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/ops.h"
#include "worker/engine/model_state.h"
#include "worker/gpu/gpu_engine_impl.h"
#include "worker/metrics/gather_by_sum.h"

namespace cohort {
namespace gpu_engine {
namespace {

// The rules that count their steps (a state tensor of one value).
bool IsAdam(const OptimizerSpec& o) {
  return o.kind() == OptimizerSpec::ADAM || o.kind() == OptimizerSpec::ADAMW ||
         o.kind() == OptimizerSpec::LAMB;
}

}  // namespace

// BatchNorm statistics averaged over every GPU of the job, so that all of
// them evaluate (and would save) the same model.
absl::Status GpuEngine::AverageBuffers() {
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

// One GPU's share of the test set, one batch at a time through the slot
// that holds no staged training batch; its sums into *sums and (as floats)
// into d.pair. The forward runs on the GPU; the output comes back to the host
// (a few KB a batch) and Objective::Accumulate, which the CPU engine uses
// too, scores it: every loss, top-1/top-5 for classes, the error sums and
// the targets' spread for float targets, and the scores AUC needs,
// computed once for both devices. Evaluation is not the hot path.
absl::Status GpuEngine::EvaluateOn(Device& d, const Dataset& test,
                                   EvalSums* sums) {
  const int64_t n = test.size();
  const int64_t total = TotalReplicas();
  const int64_t g = GlobalReplica(static_cast<int>(&d - devices_.data()));
  std::vector<int64_t> idx;
  for (int64_t i = n * g / total; i < n * (g + 1) / total; ++i) {
    idx.push_back(i);
  }
  ReadOptions read;
  read.skip_bad_samples = spec_.data().skip_bad_samples();
  Loader loader(&test, std::move(idx), spec_.eval().batch_size(), false,
                BatchLayout::kBatchOuter, 1, 2, read);
  Batch b;
  Tensor out, scratch;
  const cudaStream_t s = d.context->stream();
  while (loader.Next(&b)) {
    RETURN_IF_ERROR(b.error);
    const int slot_index = d.next_slot;
    const Slot& slot = d.slots[slot_index];
    RETURN_IF_ERROR(Stage(d, b, slot_index));
    RETURN_IF_ERROR(StreamWait(s, slot.uploaded, "the batch is on the GPU"));
    RETURN_IF_ERROR(
        d.model->Forward(slot.input.data(), slot.n, Mode::kEval).status());
    RETURN_IF_ERROR(Record(slot.consumed, s, "input slot read"));
    // {N, outputs}: the layout of b.targets (kBatchOuter) and of logits.
    out.Resize({slot.n, out_size_});
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(out.data(), d.model->output(),
                        out.size() * sizeof(float), cudaMemcpyDeviceToHost, s),
        "reading evaluation outputs"));
    RETURN_IF_ERROR(
        CudaStatus(cudaStreamSynchronize(s), "waiting for evaluation outputs"));
    objective_.Accumulate(out, b, &scratch, sums);
  }
  float flat[EvalSums::kCount];
  for (int i = 0; i < EvalSums::kCount; ++i) flat[i] = sums->v[i];
  // On the compute stream, which the all-reduce that follows waits for (a
  // legacy stream copy would not be ordered with it). A pageable source is
  // staged before the call returns.
  return CudaStatus(cudaMemcpyAsync(d.pair.data(), flat, sizeof(flat),
                                    cudaMemcpyHostToDevice, s),
                    "evaluation sums");
}

// Every GPU of the job evaluates its share; the sums are added up over all
// of them. (Workers that evaluate alone, with SSP and ASYNC shards, do not
// exist on GPUs: parameter-server mode is CPU only.)
absl::StatusOr<EvalSums> GpuEngine::Evaluate(const Dataset& test, bool) {
  if (nccl_ != nullptr) RETURN_IF_ERROR(AverageBuffers());
  std::vector<EvalSums> local(devices_.size());
  RETURN_IF_ERROR(OnEveryGpu([&](Device& d) {
    return EvaluateOn(d, test, &local[&d - devices_.data()]);
  }));
  RETURN_IF_ERROR(
      AllReduce([](Device& d) { return d.pair.data(); }, EvalSums::kCount));
  float flat[EvalSums::kCount];
  RETURN_IF_ERROR(devices_[0].context->Activate());
  RETURN_IF_ERROR(devices_[0].context->Synchronize());
  RETURN_IF_ERROR(CudaStatus(cudaMemcpy(flat, devices_[0].pair.data(),
                                        sizeof(flat), cudaMemcpyDeviceToHost),
                             "reading evaluation sums"));
  // The scores in GPU order, then in worker order: the layout of the
  // CPU engine's replicas and workers.
  EvalSums sums;
  for (const EvalSums& l : local) sums.Add(l);
  for (int i = 0; i < EvalSums::kCount; ++i) sums.v[i] = flat[i];
  if (objective_.keeps_scores() && dist_ != nullptr) {
    std::vector<float>* scores[] = {&sums.positive_scores,
                                    &sums.negative_scores};
    RETURN_IF_ERROR(GatherBySum(dist_->rank, dist_->world_size, scores,
                                [this](float* data, int64_t n) {
                                  return AllReduceOverWorkers(data, n);
                                }));
  }
  return sums;
}

// This worker's values go in on its first GPU and zeros on the others, so
// that the all-reduce over every GPU of the job adds up one copy per
// worker. Staged in buffers of the call's own (a test set's scores need not
// stay on the GPUs), freed on their GPUs.
absl::Status GpuEngine::AllReduceOverWorkers(float* data, int64_t count) {
  std::vector<DeviceFloats> staged(devices_.size());
  auto index = [this](const Device& d) { return &d - devices_.data(); };
  absl::Status status = OnEveryGpu([&](Device& d) -> absl::Status {
    DeviceFloats& buffer = staged[index(d)];
    RETURN_IF_ERROR(buffer.Reserve(std::max<int64_t>(1, count)));
    const size_t bytes = count * sizeof(float);
    const cudaStream_t s = d.context->stream();
    // On the compute stream, which the all-reduce runs on.
    return index(d) == 0
               ? CudaStatus(cudaMemcpyAsync(buffer.data(), data, bytes,
                                            cudaMemcpyHostToDevice, s),
                            "evaluation scores")
               : CudaStatus(cudaMemsetAsync(buffer.data(), 0, bytes, s),
                            "zeroing evaluation scores");
  });
  if (status.ok()) {
    status =
        AllReduce([&](Device& d) { return staged[index(d)].data(); }, count);
  }
  if (status.ok()) status = devices_[0].context->Activate();
  if (status.ok()) status = devices_[0].context->Synchronize();
  if (status.ok()) {
    status =
        CudaStatus(cudaMemcpy(data, staged[0].data(), count * sizeof(float),
                              cudaMemcpyDeviceToHost),
                   "reading gathered evaluation scores");
  }
  const absl::Status freed = OnEveryGpu([&](Device& d) {
    staged[index(d)] = DeviceFloats();
    return absl::OkStatus();
  });
  return status.ok() ? freed : status;
}

// SGD and LARS with momentum: the buffer; Adam and LAMB: m and v; RMSprop:
// square_avg, buffer, grad_avg as configured. The CPU optimizers' State()
// in the same order, so checkpoints move between devices.
std::vector<std::pair<float*, int64_t>> GpuEngine::OptimizerState(
    const Device& d) const {
  const int64_t n = d.model->flat_size();
  const OptimizerSpec& o = spec_.optimizer();
  switch (o.kind()) {
    case OptimizerSpec::SGD:
    case OptimizerSpec::LARS:
      if (o.momentum() == 0) return {};
      return {{d.momentum.data(), n}};
    case OptimizerSpec::RMSPROP: {
      std::vector<std::pair<float*, int64_t>> state = {
          {d.square_avg.data(), n}};
      if (o.momentum() > 0) state.push_back({d.momentum.data(), n});
      if (o.centered()) state.push_back({d.grad_avg.data(), n});
      return state;
    }
    default:  // Adam, AdamW, LAMB
      return {{d.adam_m.data(), n}, {d.adam_v.data(), n}};
  }
}

std::vector<std::pair<std::string, int64_t>> GpuEngine::StateLayout() const {
  std::vector<std::pair<std::string, int64_t>> layout;
  const int64_t n = host_model_->params().size();
  layout.emplace_back("params", n);
  size_t k = 0;
  const size_t tensors = OptimizerState(devices_[0]).size();
  for (; k < tensors; ++k)
    layout.emplace_back(absl::StrCat("optimizer.", k), n);
  if (IsAdam(spec_.optimizer())) {
    layout.emplace_back(absl::StrCat("optimizer.", k), 1);  // steps taken
  }
  AppendBufferLayout(*host_model_, &layout);
  return layout;
}

// GPU 0's state: every GPU holds the same after a step.
absl::StatusOr<std::vector<CheckpointTensor>> GpuEngine::CaptureState() {
  Device& d = devices_[0];
  RETURN_IF_ERROR(d.context->Activate());
  RETURN_IF_ERROR(d.model->CopyToCpu(*host_model_));
  std::vector<CheckpointTensor> out = {ParamsTensor(*host_model_)};
  size_t k = 0;
  for (const auto& [device, n] : OptimizerState(d)) {
    CheckpointTensor t{absl::StrCat("optimizer.", k++), {n}, {}};
    t.values.resize(n);
    RETURN_IF_ERROR(
        CudaStatus(cudaMemcpy(t.values.data(), device, n * sizeof(float),
                              cudaMemcpyDeviceToHost),
                   "reading optimizer state"));
    out.push_back(std::move(t));
  }
  if (IsAdam(spec_.optimizer())) {
    out.push_back({absl::StrCat("optimizer.", k),
                   {1},
                   {static_cast<float>(adam_steps_)}});
  }
  AppendBufferTensors(*host_model_, &out);
  return out;
}

absl::Status GpuEngine::RestoreState(const std::vector<float>& flat) {
  const int64_t n = host_model_->params().size();
  const float* from = RestoreParams(flat.data(), *host_model_);
  const float* optimizer = from;
  from += OptimizerState(devices_[0]).size() * n;
  if (IsAdam(spec_.optimizer())) adam_steps_ = static_cast<int64_t>(*from++);
  RestoreBuffers(from, *host_model_);
  return OnEveryGpu([&](Device& d) -> absl::Status {
    RETURN_IF_ERROR(d.model->CopyFromCpu(*host_model_));
    const float* src = optimizer;
    for (const auto& [device, n] : OptimizerState(d)) {
      RETURN_IF_ERROR(CopyToDevice(device, src, n * sizeof(float),
                                   "restoring optimizer state"));
      src += n;
    }
    return CudaStatus(cudaDeviceSynchronize(), "restoring the state");
  });
}

absl::StatusOr<std::vector<float>> GpuEngine::Parameters() {
  RETURN_IF_ERROR(devices_[0].context->Activate());
  RETURN_IF_ERROR(devices_[0].model->CopyToCpu(*host_model_));
  const Tensor& p = host_model_->params();
  return std::vector<float>(p.data(), p.data() + p.size());
}

}  // namespace gpu_engine
}  // namespace cohort

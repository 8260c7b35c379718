#include "worker/gpu/gpu_trainer.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/memory.h"
#include "kernels/cuda/ops.h"
#include "proto/coordinator.pb.h"
#include "worker/comm/kv_client.h"
#include "worker/comm/nccl_communicator.h"
#include "worker/data/dataset.h"
#include "worker/data/loader.h"
#include "worker/data/sampler.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/gpu_model.h"
#include "worker/optim/lr_schedule.h"
#include "worker/progress.h"
#include "worker/replica_pool.h"
#include "worker/zoo.h"

namespace cohort {
namespace {

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

// What one GPU owns for the whole run.
struct Device {
  int ordinal = 0;
  std::unique_ptr<GpuContext> context;
  std::unique_ptr<GpuModel> model;
  std::unique_ptr<Loader> loader;
  Batch batch;  // host, NCHW
  PinnedBuffer<float> staged_features;
  PinnedBuffer<int32_t> staged_labels;
  PinnedBuffer<float> staged_result;  // loss, then correct as a float pair
  DeviceFloats input, labels, grad_out, workspace, result, pair;
  DeviceFloats momentum, adam_m, adam_v;
  int64_t capacity = 0;  // samples input/labels/grad_out hold
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
  absl::Status Reserve(Device& d, int64_t n);
  // Runs fn(i) on every GPU's thread, with that GPU current; the first error.
  absl::Status OnEveryGpu(const std::function<absl::Status(Device&)>& fn);
  absl::Status StartEpoch(int64_t epoch);
  // Loads the next batch, runs forward, the loss and backward (queued).
  absl::Status Compute(Device& d);
  absl::Status Upload(Device& d, const Batch& b);
  absl::Status LossOf(Device& d, int64_t n, bool gradient);
  // Sums `count` floats at per-GPU device pointers over every GPU of the job.
  absl::Status AllReduce(const std::function<float*(Device&)>& buffer,
                         int64_t count);
  absl::Status OptimizerStep(Device& d, double lr);
  absl::Status ReadResult(Device& d);
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
  std::vector<Device> devices_;
  std::unique_ptr<PinnedHostPool> pinned_;
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
  ASSIGN_OR_RETURN(d.model,
                   GpuModel::Create(spec_.model(), data_.train->sample_shape(),
                                    *host_model_, d.context.get()));
  d.model->SeedRandom(spec_.seed() + GlobalReplica(i));
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
  return Reserve(d, std::max(spec_.batch_size(), spec_.eval().batch_size()));
}

absl::Status GpuTrainer::Reserve(Device& d, int64_t n) {
  if (n <= d.capacity) return absl::OkStatus();
  const int64_t sample = Product(data_.train->sample_shape());
  RETURN_IF_ERROR(d.input.Reserve(n * sample));
  RETURN_IF_ERROR(d.labels.Reserve(n));
  RETURN_IF_ERROR(d.grad_out.Reserve(n * classes_));
  RETURN_IF_ERROR(
      d.workspace.Reserve(SoftmaxCrossEntropyWorkspaceBytes(n) / 4 + 2));
  ASSIGN_OR_RETURN(d.staged_features,
                   PinnedBuffer<float>::Allocate(pinned_.get(), n * sample));
  ASSIGN_OR_RETURN(d.staged_labels,
                   PinnedBuffer<int32_t>::Allocate(pinned_.get(), n));
  d.capacity = n;
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

// Host batch -> pinned staging -> device, on the GPU's stream. The staging
// buffers are reused only after the previous step's synchronization.
absl::Status GpuTrainer::Upload(Device& d, const Batch& b) {
  const int64_t n = static_cast<int64_t>(b.labels.size());
  RETURN_IF_ERROR(Reserve(d, n));
  std::memcpy(d.staged_features.data(), b.features.data(),
              b.features.size() * sizeof(float));
  std::memcpy(d.staged_labels.data(), b.labels.data(), n * sizeof(int32_t));
  const cudaStream_t s = d.context->stream();
  RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(d.input.data(), d.staged_features.data(),
                                 b.features.size() * sizeof(float),
                                 cudaMemcpyHostToDevice, s),
                 "uploading a batch"));
  return CudaStatus(
      cudaMemcpyAsync(d.labels.data(), d.staged_labels.data(),
                      n * sizeof(int32_t), cudaMemcpyHostToDevice, s),
      "uploading labels");
}

// Mean cross-entropy of the last forward into d.result[0] and the count
// of correct predictions into d.result[2..3] (int64, cleared first).
absl::Status GpuTrainer::LossOf(Device& d, int64_t n, bool gradient) {
  const cudaStream_t s = d.context->stream();
  RETURN_IF_ERROR(
      CudaStatus(cudaMemsetAsync(d.result.data(), 0, 4 * sizeof(float), s),
                 "clearing the loss"));
  CudaCrossEntropyBuffers b;
  b.logits = d.model->output();
  b.labels = As<int32_t>(d.labels);
  b.loss = d.result.data();
  b.grad = gradient ? d.grad_out.data() : nullptr;
  b.correct = reinterpret_cast<int64_t*>(d.result.data() + 2);
  b.workspace = d.workspace.data();
  b.workspace_bytes = d.workspace.capacity() * sizeof(float);
  return SoftmaxCrossEntropyAsync(b, n, classes_, s);
}

absl::Status GpuTrainer::Compute(Device& d) {
  if (!d.loader->Next(&d.batch)) {
    return absl::InternalError("a loader ended before num_batches()");
  }
  const int64_t n = static_cast<int64_t>(d.batch.labels.size());
  RETURN_IF_ERROR(Upload(d, d.batch));
  RETURN_IF_ERROR(d.model->Forward(d.input.data(), n, Mode::kTrain).status());
  RETURN_IF_ERROR(LossOf(d, n, /*gradient=*/true));
  d.seen = n;
  return d.model->Backward(d.grad_out.data());
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

// Waits for the GPU's step and reads its loss and correct count.
absl::Status GpuTrainer::ReadResult(Device& d) {
  const cudaStream_t s = d.context->stream();
  RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(d.staged_result.data(), d.result.data(),
                                 4 * sizeof(float), cudaMemcpyDeviceToHost, s),
                 "reading the loss"));
  RETURN_IF_ERROR(d.context->Synchronize());
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
  while (er.steps < batches && (max_steps_ <= 0 || step_ < max_steps_)) {
    RETURN_IF_ERROR(OnEveryGpu([this](Device& d) { return Compute(d); }));
    RETURN_IF_ERROR(AllReduce([](Device& d) { return d.model->grads(); },
                              devices_[0].model->flat_size()));
    const double lr = LearningRate(spec_.optimizer(), spec_.lr_schedule(),
                                   step_, TotalSteps());
    ++adam_steps_;
    RETURN_IF_ERROR(OnEveryGpu([this, lr](Device& d) -> absl::Status {
      RETURN_IF_ERROR(OptimizerStep(d, lr));
      return ReadResult(d);
    }));
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

// Every GPU evaluates its share of the test set; the sums are added up
// over every GPU of the job.
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
    while (loader.Next(&b)) {
      const int64_t m = static_cast<int64_t>(b.labels.size());
      RETURN_IF_ERROR(Upload(d, b));
      RETURN_IF_ERROR(
          d.model->Forward(d.input.data(), m, Mode::kEval).status());
      RETURN_IF_ERROR(LossOf(d, m, /*gradient=*/false));
      RETURN_IF_ERROR(ReadResult(d));
      loss += static_cast<double>(d.loss) * m;
      correct += d.correct;
    }
    const float pair[2] = {static_cast<float>(loss),
                           static_cast<float>(correct)};
    return CudaStatus(
        cudaMemcpy(d.pair.data(), pair, sizeof(pair), cudaMemcpyHostToDevice),
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

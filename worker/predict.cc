#include "worker/predict.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "worker/compute_threads.h"
#include "worker/zoo.h"

namespace cohort {
namespace {

// Samples [first, first + m) through `model`, their outputs into `result`
// (sample-major, at sample `first`).
absl::Status PredictBatch(Model<float>& model, const Shape& in,
                          const float* inputs, int64_t first, int64_t m,
                          float* result) {
  const Shape& out = model.output_shape();
  const int64_t in_size = NumElements(in), out_size = NumElements(out);
  // The engine's batch-inner layout ({C, N, rest}) for spatial samples.
  const bool inner = in.size() >= 2;
  Shape shape = {inner ? in[0] : m};
  shape.push_back(inner ? m : in[0]);
  shape.insert(shape.end(), in.begin() + 1, in.end());
  Tensor x(shape);
  const int64_t c = in[0], rest = in_size / c;
  for (int64_t k = 0; k < m; ++k) {
    const float* sample = inputs + (first + k) * in_size;
    for (int64_t ch = 0; ch < c; ++ch) {
      float* to = inner ? x.data() + (ch * m + k) * rest
                        : x.data() + k * in_size + ch * rest;
      std::copy(sample + ch * rest, sample + (ch + 1) * rest, to);
    }
  }
  const Tensor& y = model.Forward(x, Mode::kEval);
  RETURN_IF_ERROR(model.InputError());
  // Outputs of rank >= 2 come batch-inner too: back to sample-major.
  const bool inner_out = out.size() >= 2;
  const int64_t oc = out[0], orest = out_size / oc;
  for (int64_t k = 0; k < m; ++k) {
    float* to = result + (first + k) * out_size;
    for (int64_t ch = 0; ch < oc; ++ch) {
      const float* from = inner_out ? y.data() + (ch * m + k) * orest
                                    : y.data() + k * out_size + ch * orest;
      std::copy(from, from + orest, to + ch * orest);
    }
  }
  return absl::OkStatus();
}

// The most copies of the model, up to `wanted`, whose forward passes at
// `batch` this machine's available memory holds; one where it cannot tell.
int StreamsThatFit(const TrainedModel& t, int wanted, int64_t batch) {
  for (int s = wanted; s > 1; --s) {
    if (CheckForwardMemory(t, batch, s).ok()) return s;
  }
  return 1;
}

// A copy of `trained`'s model sharing its parameters, with its BatchNorm
// statistics, frozen.
absl::StatusOr<std::unique_ptr<Model<float>>> CopyModel(TrainedModel& trained) {
  ASSIGN_OR_RETURN(std::unique_ptr<Model<float>> copy,
                   BuildReplica<float>(trained.spec.model(), *trained.model));
  const std::vector<Tensor*> from = trained.model->Buffers();
  const std::vector<Tensor*> to = copy->Buffers();
  for (size_t i = 0; i < from.size(); ++i) {
    std::copy(from[i]->data(), from[i]->data() + from[i]->size(),
              to[i]->data());
  }
  copy->FreezeParameters();
  return copy;
}

// Batches from this size on run one at a time by default: ResNet-50 at
// batch 8 on two threads ran as fast on one copy as on two (at batch 1, two
// copies were 6-13% faster).
constexpr int64_t kOneStreamBatch = 8;

// How many streams `requested` (0: the default) comes to.
int StreamCount(const TrainedModel& trained, int requested, int threads,
                int64_t batch, int64_t batches) {
  int64_t streams = requested > 0             ? requested
                    : batch < kOneStreamBatch ? threads
                                              : 1;
  streams = std::min<int64_t>({streams, threads, batches});
  if (streams <= 1 || !trained.model->sparse_tables().empty()) return 1;
  return StreamsThatFit(trained, static_cast<int>(streams), batch);
}

}  // namespace

absl::StatusOr<std::vector<float>> Predict(TrainedModel& trained,
                                           const float* inputs, int64_t n,
                                           int64_t batch, int streams) {
  Model<float>& model = *trained.model;
  model.FreezeParameters();  // a loaded model only predicts
  const int64_t batches = (n + batch - 1) / batch;
  RETURN_IF_ERROR(CheckForwardMemory(trained, std::min(batch, n), 1));
  const int threads = ComputeThreads();
  streams = StreamCount(trained, streams, threads, batch, batches);
  std::vector<std::unique_ptr<Model<float>>> copies;
  std::vector<Model<float>*> models = {&model};
  for (int s = 1; s < streams; ++s) {
    ASSIGN_OR_RETURN(copies.emplace_back(), CopyModel(trained));
    models.push_back(copies.back().get());
  }
  std::vector<float> result(n * NumElements(model.output_shape()));
  std::atomic<int64_t> next{0};
  std::vector<absl::Status> failed(streams);
  auto run = [&](int s) {
    for (int64_t b; (b = next.fetch_add(1)) < batches;) {
      failed[s] =
          PredictBatch(*models[s], trained.input_shape, inputs, b * batch,
                       std::min(batch, n - b * batch), result.data());
      if (!failed[s].ok()) next.store(batches);  // the others stop too
    }
  };
  SetComputeThreads(threads / streams);
  std::vector<std::thread> others;
  for (int s = 1; s < streams; ++s) others.emplace_back(run, s);
  run(0);
  for (std::thread& t : others) t.join();
  SetComputeThreads(threads);
  for (const absl::Status& s : failed) RETURN_IF_ERROR(s);
  return result;
}

}  // namespace cohort

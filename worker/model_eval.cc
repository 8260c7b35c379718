#include "worker/model_eval.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <utility>

#include "common/status_macros.h"

namespace cohort {
namespace {

// The model's outputs, batch-inner for rank >= 2 ({C, N, rest}), back to
// sample-major.
void SampleMajor(const Tensor& y, const Shape& per_sample, int64_t n,
                 Tensor* out) {
  Shape shape = {n};
  shape.insert(shape.end(), per_sample.begin(), per_sample.end());
  out->Resize(shape);
  if (per_sample.size() < 2) {
    out->CopyFrom(y);
    return;
  }
  const int64_t c = per_sample[0], rest = NumElements(per_sample) / c;
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* from = y.data() + (ch * n + k) * rest;
      std::copy(from, from + rest, out->data() + (k * c + ch) * rest);
    }
  }
}

// Every sample of `data` in order, `batch` at a time, once a forward pass
// of that many is known to fit this machine's memory.
absl::StatusOr<std::unique_ptr<Loader>> InOrder(const TrainedModel& trained,
                                                const Dataset& data,
                                                int64_t batch) {
  RETURN_IF_ERROR(CheckForwardMemory(
      trained, std::max<int64_t>(1, std::min(batch, data.size())), 1));
  std::vector<int64_t> indices(data.size());
  std::iota(indices.begin(), indices.end(), int64_t{0});
  ReadOptions read;
  read.skip_bad_samples = trained.spec.data().skip_bad_samples();
  return std::make_unique<Loader>(&data, std::move(indices), batch, false,
                                  BatchLayout::kBatchInner, 2, 2, read);
}

}  // namespace

absl::Status ForEachPrediction(
    TrainedModel& trained, const Dataset& data, int64_t batch,
    const std::function<void(int64_t, const Tensor&, const Batch&)>& each) {
  ASSIGN_OR_RETURN(std::unique_ptr<Loader> loader,
                   InOrder(trained, data, batch));
  Batch b;
  Tensor outputs;
  int64_t first = 0;
  trained.model->FreezeParameters();  // a loaded model only predicts
  while (loader->Next(&b)) {
    RETURN_IF_ERROR(b.error);
    const Tensor& y = trained.model->Forward(b.features, Mode::kEval);
    RETURN_IF_ERROR(trained.model->InputError());
    SampleMajor(y, trained.model->output_shape(), b.size(), &outputs);
    each(first, outputs, b);
    first += b.size();
  }
  return absl::OkStatus();
}

absl::StatusOr<SplitEvaluation> EvaluateSplit(TrainedModel& trained,
                                              const Dataset& data,
                                              int64_t batch) {
  const Objective objective(trained.spec, data);
  RETURN_IF_ERROR(objective.CheckModelOutput(trained.model->output_shape()));
  const int k = data.num_classes();
  SplitEvaluation e;
  if (k > 0) e.confusion.assign(static_cast<size_t>(k) * k, 0);
  ASSIGN_OR_RETURN(std::unique_ptr<Loader> loader,
                   InOrder(trained, data, batch));
  EvalSums sums;
  Tensor scratch;
  Batch b;
  while (loader->Next(&b)) {
    RETURN_IF_ERROR(b.error);
    // The model's output and the batch's targets share the loader's
    // layout, which is what the objective compares.
    const Tensor& y = trained.model->Forward(b.features, Mode::kEval);
    RETURN_IF_ERROR(trained.model->InputError());
    objective.Accumulate(y, b, &scratch, &sums);
    if (k == 0) continue;
    const int64_t classes = y.size() / b.size();  // flat [N, K]
    for (int64_t i = 0; i < b.size(); ++i) {
      const float* row = y.data() + i * classes;
      const int64_t best = std::max_element(row, row + classes) - row;
      if (best < k) ++e.confusion[b.labels[i] * k + best];
    }
  }
  e.samples = static_cast<int64_t>(sums.v[EvalSums::kSamples]);
  e.metrics = objective.Finish(sums);
  return e;
}

}  // namespace cohort

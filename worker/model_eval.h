// A trained model (worker/trained_model.h) over a data set's split: the
// job's metrics (worker/objective.h) with a confusion matrix, or each
// sample's predictions.
//
// Thread safety: one thread per TrainedModel; the loader's threads are
// internal.
#ifndef COHORT_WORKER_MODEL_EVAL_H_
#define COHORT_WORKER_MODEL_EVAL_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "worker/data/dataset.h"
#include "worker/data/loader.h"
#include "worker/objective.h"
#include "worker/trained_model.h"

namespace cohort {

struct SplitEvaluation {
  int64_t samples = 0;
  Metrics metrics;
  // Class data: confusion[label * classes + predicted] (top-1).
  std::vector<int64_t> confusion;
};

// Evaluates `trained` on every sample of `data` in order, `batch` at a
// time. A sample that fails to read ends it with that error unless the
// spec skips bad samples.
absl::StatusOr<SplitEvaluation> EvaluateSplit(TrainedModel& trained,
                                              const Dataset& data,
                                              int64_t batch);

// Calls `each(first, outputs, batch)` for every batch of `data` in order:
// `outputs` holds the model's outputs of samples [first, first + n),
// sample-major ({n, *output shape}); `batch` is the loader's batch (labels
// or targets).
absl::Status ForEachPrediction(
    TrainedModel& trained, const Dataset& data, int64_t batch,
    const std::function<void(int64_t first, const Tensor& outputs,
                             const Batch& batch)>& each);

}  // namespace cohort

#endif  // COHORT_WORKER_MODEL_EVAL_H_

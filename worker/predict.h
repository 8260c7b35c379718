// A trained model run forward over an array of samples (`cohort predict`):
// the samples go through in batches, on one copy of the model or on several
// side by side.
//
// Several copies (streams) pay where one forward pass cannot keep the
// compute threads busy: a ResNet-50 at batch 1 on two threads ran 6-13%
// faster as two copies on one thread each. The copies share the
// parameters; each keeps its own activations and converted weights.
//
// Thread safety: Predict drives the model (and its copies) itself; nothing
// else may use the model while it runs.
#ifndef COHORT_WORKER_PREDICT_H_
#define COHORT_WORKER_PREDICT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/trained_model.h"

namespace cohort {

// Runs the model in evaluation mode over `n` samples of input_shape at
// `inputs` (sample-major), `batch` at a time; returns the outputs
// sample-major, output_shape() per sample.
//
// `streams` copies of the model take the batches in turn, each on an equal
// share of the compute threads (worker/compute_threads.h); 0 means one per
// compute thread for batches under 8 samples, else one. Fewer run where
// there are fewer batches, where this machine's available memory holds
// fewer copies, or where the model has sparse tables (one copy). Every copy
// computes a batch alike, so the outputs do not depend on which copy ran
// it.
//
// InvalidArgument when an input is one the model cannot compute on
// (Model::InputError: a row id past its table).
absl::StatusOr<std::vector<float>> Predict(TrainedModel& trained,
                                           const float* inputs, int64_t n,
                                           int64_t batch, int streams = 1);

}  // namespace cohort

#endif  // COHORT_WORKER_PREDICT_H_

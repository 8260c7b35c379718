// A trained model taken out of a checkpoint file: the job spec the file
// records, the model it describes with the file's parameters and BatchNorm
// statistics, and that state as PyTorch-named tensors (for export).
//
// Ownership: a TrainedModel owns its model. Thread safety: none; one
// thread uses it.
#ifndef COHORT_WORKER_TRAINED_MODEL_H_
#define COHORT_WORKER_TRAINED_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/safetensors.h"
#include "common/tensor.h"
#include "proto/job.pb.h"
#include "worker/model.h"

namespace cohort {

struct TrainedModel {
  JobSpec spec;
  std::string spec_text;  // as recorded in the checkpoint
  Shape input_shape;      // per sample
  int64_t step = 0;
  std::unique_ptr<Model<float>> model;
};

// Reads and verifies `path` (a checkpoint file, or a directory: its newest
// checkpoint that verifies), then rebuilds its model. FailedPrecondition
// for a checkpoint that does not record its job spec (written before
// checkpoints described themselves); DataLoss when its tensors do not fit
// the model it records; the checkpoint reader's errors otherwise.
absl::StatusOr<TrainedModel> LoadTrainedModel(const std::string& path);

// The state as PyTorch's state_dict of an nn.Sequential of the same layers
// names it: every parameter ("0.weight"), every BatchNorm buffer
// ("1.running_mean", "1.running_var") and its "1.num_batches_tracked"
// (int64: the steps trained, as PyTorch counts batches). In layer order.
std::vector<SafeTensor> StateDict(TrainedModel& trained);

// The model's layer list (a zoo model expanded) as a JSON array of
// LayerSpec objects with proto field names, e.g. [{"linear":
// {"out_features": 10}}, {"relu": {}}]: enough, with the tensors' shapes,
// to rebuild the model elsewhere.
absl::StatusOr<std::string> LayersJson(const TrainedModel& trained);

// Runs the model in evaluation mode over `n` samples of input_shape at
// `inputs` (sample-major), `batch` at a time; returns the outputs
// sample-major, output_shape() per sample.
std::vector<float> Predict(TrainedModel& trained, const float* inputs,
                           int64_t n, int64_t batch);

}  // namespace cohort

#endif  // COHORT_WORKER_TRAINED_MODEL_H_

// A trained model taken out of a checkpoint file: the job spec the file
// records, the model it describes with the file's parameters and BatchNorm
// statistics, and that state as PyTorch-named tensors (for export).
//
// The spec inside a checkpoint is input like any spec file, and the file's
// checksums say only that nobody damaged it by accident: before any of the
// model is allocated, its sizes are checked against the tensors the file
// holds and against this machine's memory, as `cohort train` checks a spec.
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
#include "common/checkpoint.h"
#include "common/model_sizes.h"
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
  std::string source;  // the checkpoint file it came from
  ModelSizes sizes;    // of the model, for memory estimates
  std::unique_ptr<Model<float>> model;
};

// A checkpoint found from a path a user gave.
struct FoundCheckpoint {
  Checkpoint checkpoint;
  std::string path;  // the file it was read from
  // "PATH: reason" for each newer checkpoint of the directory that does not
  // verify, newest first (empty for a file).
  std::vector<std::string> skipped;
};

// `path` is a checkpoint file, or a directory: its newest checkpoint that
// verifies (common/checkpoint.h LoadLatestCheckpoint, whose errors it
// returns). The caller decides what newer, damaged ones mean.
absl::StatusOr<FoundCheckpoint> FindCheckpoint(const std::string& path);

// The model a checkpoint records, known without building it.
struct RecordedModel {
  JobSpec spec;
  std::string spec_text;
  ModelSizes sizes;  // sizes.input is the per-sample input shape
};

// Parses the job spec `c` records (as a spec file is parsed) and sizes its
// model. FailedPrecondition for a checkpoint that does not record its job
// spec (written before checkpoints described themselves); InvalidArgument
// for a spec that does not parse or size; DataLoss when the model it
// describes does not have the parameters `c` holds. `path` names `c` in
// messages.
absl::StatusOr<RecordedModel> CheckRecordedModel(const Checkpoint& c,
                                                 const std::string& path);

// Rebuilds the model `c` (read from `path`) records, with its parameters
// and buffers: CheckRecordedModel, then the memory estimate `cohort train`
// makes (common/memory_estimate.h, for a model run forward only), which
// must fit `available_memory` bytes (-1: what this machine has available
// now); FailedPrecondition naming the largest part when it does not. DataLoss
// when the tensors do not fit the model.
absl::StatusOr<TrainedModel> RebuildTrainedModel(const Checkpoint& c,
                                                 const std::string& path,
                                                 int64_t available_memory = -1);

// Whether `copies` forward passes of `trained` at `batch` samples each fit
// in `available_memory` bytes (-1: what this machine has available now; OK
// where it cannot tell), by the estimate RebuildTrainedModel makes at the
// spec's batch, less the model already allocated (copies beyond the first
// share its parameters and add their own gradients): FailedPrecondition
// naming --batch and the largest part when they do not.
absl::Status CheckForwardMemory(const TrainedModel& trained, int64_t batch,
                                int copies, int64_t available_memory = -1);

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

}  // namespace cohort

#endif  // COHORT_WORKER_TRAINED_MODEL_H_

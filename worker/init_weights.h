// Starting weights from a safetensors file (`cohort train --init-from`):
// fine-tuning from PyTorch, or from another cohort run's export.
//
// Thread safety: plain functions.
#ifndef COHORT_WORKER_INIT_WEIGHTS_H_
#define COHORT_WORKER_INIT_WEIGHTS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/checkpoint.h"
#include "common/safetensors.h"
#include "worker/model.h"

namespace cohort {

// Overwrites the "params" and "buffer.I" tensors of `state` (an engine's
// CaptureState()) with `file`'s tensors, matched by the names `model` (a
// host model of the same spec) gives them, or else by their torchvision
// names under `aliases` (worker/torchvision_names.h; empty for none), as
// PyTorch's strict load_state_dict does: every parameter and buffer must
// be there with the same shape, and nothing else may be
// (num_batches_tracked excepted). InvalidArgument naming `path` and the
// tensor otherwise.
absl::Status ApplyWeights(const SafetensorsFile& file, const std::string& path,
                          const Model<float>& model,
                          const std::map<std::string, std::string>& aliases,
                          std::vector<CheckpointTensor>* state);

}  // namespace cohort

#endif  // COHORT_WORKER_INIT_WEIGHTS_H_

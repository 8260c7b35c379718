// The parts of a device engine's training state that live in a host
// model (worker/model.h): the flat parameters and the BatchNorm buffers,
// named as DeviceEngine::StateLayout() says ("params", "buffer.I"). Both
// engines use these, so their checkpoints agree tensor for tensor.
//
// Thread safety: plain functions over a model the caller owns.
#ifndef COHORT_WORKER_ENGINE_MODEL_STATE_H_
#define COHORT_WORKER_ENGINE_MODEL_STATE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/checkpoint.h"
#include "proto/ps.pb.h"
#include "worker/model.h"

namespace cohort {

using StateLayoutEntries = std::vector<std::pair<std::string, int64_t>>;

// Each parameter tensor's length including its alignment padding, in
// order; they tile the flat parameter buffer.
std::vector<int64_t> PaddedParamSizes(Model<float>& model);

void AppendBufferLayout(Model<float>& model, StateLayoutEntries* layout);
CheckpointTensor ParamsTensor(Model<float>& model);
void AppendBufferTensors(Model<float>& model,
                         std::vector<CheckpointTensor>* out);

// What the tensors of a checkpoint are, for tools outside cohort: a JSON
// object {"params": [{"name": "0.weight", "shape": [32, 100], "offset": 0},
// ...], "buffers": [{"name": "1.running_mean", "shape": [32]}, ...]}:
// each parameter's PyTorch-style name, shape and offset into the flat
// "params" tensor, and the "buffer.I" tensors' names in order.
std::string StateNamesJson(const Model<float>& model);

// The model's sparse tables as the parameter-server shards take them
// (InitHeader.tables): ids in order, tensor names, sizes, seeds (drawn by
// InitializeParameters) and initial bounds.
std::vector<SparseTableInfo> SparseTableInfos(const Model<float>& model);

// Copies the parameters (RestoreParams) or the buffers (RestoreBuffers)
// from `from` into the model; returns the first value after them.
const float* RestoreParams(const float* from, Model<float>& model);
const float* RestoreBuffers(const float* from, Model<float>& model);

}  // namespace cohort

#endif  // COHORT_WORKER_ENGINE_MODEL_STATE_H_

#include "worker/trained_model.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint.h"
#include "common/machine_memory.h"
#include "common/memory_estimate.h"
#include "common/model_sizes.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "worker/engine/model_state.h"
#include "worker/zoo.h"

namespace cohort {
namespace {

std::string FloatBytes(const float* p, int64_t n) {
  return std::string(reinterpret_cast<const char*>(p), n * sizeof(float));
}

// The checkpoint's tensor `name`, which must hold `want` values.
absl::StatusOr<const CheckpointTensor*> Find(const Checkpoint& c,
                                             const std::string& name,
                                             int64_t want,
                                             const std::string& path) {
  for (const CheckpointTensor& t : c.tensors) {
    if (t.name != name) continue;
    if (static_cast<int64_t>(t.values.size()) != want) {
      return absl::DataLossError(
          absl::StrCat(path, ": tensor ", name, " holds ", t.values.size(),
                       " values where the model it records needs ", want));
    }
    return &t;
  }
  return absl::DataLossError(
      absl::StrCat(path, ": no tensor ", name, " for the model it records"));
}

// Copies the checkpoint's parameters and buffers into the model.
absl::Status Restore(const Checkpoint& c, const std::string& path,
                     Model<float>& model) {
  ASSIGN_OR_RETURN(const CheckpointTensor* params,
                   Find(c, "params", model.params().size(), path));
  RestoreParams(params->values.data(), model);
  const std::vector<Tensor*> buffers = model.Buffers();
  for (size_t i = 0; i < buffers.size(); ++i) {
    ASSIGN_OR_RETURN(
        const CheckpointTensor* b,
        Find(c, absl::StrCat("buffer.", i), buffers[i]->size(), path));
    std::copy(b->values.begin(), b->values.end(), buffers[i]->data());
  }
  return absl::OkStatus();
}

// This machine's available memory, or the caller's limit where
// `available_memory` >= 0; nullopt where it cannot tell.
std::optional<AvailableMemory> AvailableFor(int64_t available_memory) {
  if (available_memory >= 0) {
    return AvailableMemory{available_memory, "the caller's limit"};
  }
  absl::StatusOr<AvailableMemory> detected = DetectAvailableMemory();
  if (!detected.ok()) return std::nullopt;
  return *detected;
}

// The memory check `cohort train` makes before it allocates a model, for
// one replica that runs it forward: refused here rather than aborting in
// an allocation that cannot succeed.
absl::Status CheckModelMemory(const RecordedModel& r, const std::string& path,
                              int64_t available_memory) {
  const std::optional<AvailableMemory> available =
      AvailableFor(available_memory);
  if (!available) return absl::OkStatus();  // nothing to compare with
  WorkerMemoryOptions w;
  w.forward_only = true;
  w.checkpoints = true;  // the checkpoint's copy, held while restoring
  absl::Status fits = CheckMemoryFits(EstimateWorkerMemory(r.spec, r.sizes, w),
                                      *available, "its model");
  if (fits.ok()) return fits;
  return absl::Status(fits.code(), absl::StrCat(path, ": ", fits.message()));
}

}  // namespace

absl::StatusOr<FoundCheckpoint> FindCheckpoint(const std::string& path) {
  FoundCheckpoint found;
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    ASSIGN_OR_RETURN(found.checkpoint, ReadCheckpointFile(path));
    found.path = path;
    return found;
  }
  // DIR/best holds the best checkpoint of checkpoint.keep_best.
  ASSIGN_OR_RETURN(found.checkpoint,
                   LoadLatestCheckpoint(path, &found.skipped));
  found.path = absl::StrCat(path, absl::EndsWith(path, "/") ? "" : "/",
                            CheckpointFileName(found.checkpoint.step));
  return found;
}

absl::StatusOr<RecordedModel> CheckRecordedModel(const Checkpoint& c,
                                                 const std::string& path) {
  const auto spec = c.metadata.find("job_spec");
  if (spec == c.metadata.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path,
        " does not record its job spec (written by a cohort from before "
        "checkpoints described themselves): resume it with this cohort and "
        "let it write a new checkpoint"));
  }
  RecordedModel r;
  r.spec_text = spec->second;
  ASSIGN_OR_RETURN(r.spec, ParseJobSpec(r.spec_text, path + " (job_spec)"));
  absl::StatusOr<ModelSizes> sizes = InferJobModelSizes(r.spec);
  if (!sizes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": the model its job spec describes: ", sizes.status().message()));
  }
  r.sizes = *std::move(sizes);
  // Before the model is built: a spec edited to a larger model would
  // otherwise allocate that model first and find out afterwards.
  RETURN_IF_ERROR(Find(c, "params", r.sizes.padded_parameters, path).status());
  return r;
}

absl::StatusOr<TrainedModel> RebuildTrainedModel(const Checkpoint& c,
                                                 const std::string& path,
                                                 int64_t available_memory) {
  ASSIGN_OR_RETURN(RecordedModel r, CheckRecordedModel(c, path));
  RETURN_IF_ERROR(CheckModelMemory(r, path, available_memory));
  TrainedModel t;
  t.spec = std::move(r.spec);
  t.spec_text = std::move(r.spec_text);
  t.input_shape = r.sizes.input;
  t.sizes = r.sizes;
  t.step = c.step;
  t.source = path;
  ASSIGN_OR_RETURN(t.model, BuildModelToRestore<float>(
                                t.spec.model(), t.input_shape, t.spec.seed()));
  RETURN_IF_ERROR(Restore(c, path, *t.model));
  return t;
}

std::vector<SafeTensor> StateDict(TrainedModel& trained) {
  Model<float>& model = *trained.model;
  std::vector<SafeTensor> out;
  for (const auto& e : model.param_store().entries()) {
    out.push_back(
        {model.TensorName(e.name), "F32", e.shape,
         FloatBytes(model.params().data() + e.offset, NumElements(e.shape))});
  }
  const std::vector<std::string> names = model.BufferNames();
  const std::vector<Tensor*> buffers = model.Buffers();
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string name = model.TensorName(names[i]);
    out.push_back({name, "F32", buffers[i]->shape(),
                   FloatBytes(buffers[i]->data(), buffers[i]->size())});
    // PyTorch's BatchNorm keeps a batch counter beside its statistics.
    if (absl::EndsWith(name, ".running_var")) {
      const std::string prefix =
          name.substr(0, name.size() - std::strlen("running_var"));
      const int64_t steps = trained.step;
      out.push_back({prefix + "num_batches_tracked",
                     "I64",
                     {},
                     std::string(reinterpret_cast<const char*>(&steps), 8)});
    }
  }
  return out;
}

absl::StatusOr<std::string> LayersJson(const TrainedModel& trained) {
  ASSIGN_OR_RETURN(const std::vector<LayerSpec> layers,
                   LayerSpecs(trained.spec.model()));
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  std::string out = "[";
  for (size_t i = 0; i < layers.size(); ++i) {
    std::string one;
    const auto s =
        google::protobuf::util::MessageToJsonString(layers[i], &one, o);
    if (!s.ok()) return absl::InternalError(s.message().as_string());
    absl::StrAppend(&out, i ? ", " : "", one);
  }
  return out + "]";
}

absl::Status CheckForwardMemory(const TrainedModel& trained, int64_t batch,
                                int copies, int64_t available_memory) {
  const std::optional<AvailableMemory> available =
      AvailableFor(available_memory);
  if (!available) return absl::OkStatus();
  JobSpec spec = trained.spec;
  spec.set_batch_size(static_cast<int>(std::min<int64_t>(batch, 1 << 30)));
  spec.mutable_eval()->set_disable(true);  // no other batch runs
  WorkerMemoryOptions w;
  w.forward_only = true;
  w.model_allocated = true;  // the copies share its parameters
  w.replicas = copies;
  absl::Status fits =
      CheckMemoryFits(EstimateWorkerMemory(spec, trained.sizes, w), *available,
                      "the forward pass");
  if (fits.ok()) return fits;
  return absl::Status(
      fits.code(),
      absl::StrCat("--batch=", batch,
                   copies > 1 ? absl::StrCat(" on ", copies, " copies") : "",
                   ": ", fits.message(), "; a smaller --batch needs less"));
}

}  // namespace cohort

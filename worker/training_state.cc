// The training loop's state: checkpoints, exact resume, the final
// checkpoint on a termination signal, and the elastic state agreed on when
// a generation forms (see training_loop.h).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "common/onnx/onnx_import.h"
#include "common/safetensors.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "common/zoo_specs.h"
#include "google/protobuf/text_format.h"
#include "worker/comm/communicator.h"
#include "worker/init_weights.h"
#include "worker/timeline.h"
#include "worker/torchvision_names.h"
#include "worker/training_loop.h"
#include "worker/zoo.h"

namespace cohort {
namespace {

// Non-negative integers travel through a float sum as four 16-bit pieces,
// each exact in a float; a sum with zeros from every other rank is exact.
constexpr int kIntFloats = 4;

void PutInt(int64_t v, float* out) {
  for (int i = 0; i < kIntFloats; ++i) {
    out[i] =
        static_cast<float>((static_cast<uint64_t>(v) >> (16 * i)) & 0xffff);
  }
}

int64_t GetInt(const float* in) {
  uint64_t v = 0;
  for (int i = 0; i < kIntFloats; ++i) {
    v |= static_cast<uint64_t>(in[i]) << (16 * i);
  }
  return static_cast<int64_t>(v);
}

// The early-stopping state (early_stopping.h) as integers for the elastic
// agreement, the best value by its bits: exact on every rank.
constexpr int kControlInts = 7;

void PutControl(const Checkpoint& c, float* out) {
  EarlyStoppingState s;
  auto it = c.metadata.find("early_stopping");
  if (it != c.metadata.end()) {
    // ResumeCandidate refused one that does not parse.
    s = EarlyStoppingState::Decode(it->second).value_or(s);
  }
  uint64_t bits;
  static_assert(sizeof(bits) == sizeof(s.best));
  std::memcpy(&bits, &s.best, sizeof(bits));
  const int64_t v[kControlInts] = {
      s.metric,    s.has_best,   static_cast<int64_t>(bits),
      s.best_step, s.since_best, s.last_eval_step,
      s.stopped};
  for (int i = 0; i < kControlInts; ++i) PutInt(v[i], out + i * kIntFloats);
}

std::string GetControl(const float* in) {
  int64_t v[kControlInts];
  for (int i = 0; i < kControlInts; ++i) v[i] = GetInt(in + i * kIntFloats);
  EarlyStoppingState s;
  s.metric = static_cast<int>(v[0]);
  s.has_best = v[1] != 0;
  const uint64_t bits = static_cast<uint64_t>(v[2]);
  std::memcpy(&s.best, &bits, sizeof(bits));
  s.best_step = v[3];
  s.since_best = v[4];
  s.last_eval_step = v[5];
  s.stopped = v[6] != 0;
  return s.Encode();
}

// A non-negative integer of `c`'s metadata; 0 when absent or malformed.
int64_t MetadataInt(const Checkpoint& c, const std::string& key) {
  int64_t v = 0;
  auto it = c.metadata.find(key);
  if (it != c.metadata.end()) (void)absl::SimpleAtoi(it->second, &v);
  return std::max<int64_t>(0, v);
}

int64_t EpochSteps(const Checkpoint& c) {
  return MetadataInt(c, "epoch_steps");
}

// A checkpoint that cannot be written is the job's failure, never a peer's:
// the file error (UNAVAILABLE, which reads as a lost peer and would send
// the job into regroup after regroup) becomes RESOURCE_EXHAUSTED, naming
// the step, the path and the errno.
absl::Status WriteOrFail(const std::string& dir, const Checkpoint& c,
                         const CheckpointWriteOptions& o) {
  const absl::Status s = WriteCheckpoint(dir, c, o);
  if (s.ok()) return s;
  return absl::ResourceExhaustedError(
      absl::StrCat("the checkpoint of step ", c.step, " cannot be written (",
                   s.message(), "); the job fails rather than go on unsaved"));
}

}  // namespace

absl::StatusOr<Checkpoint> TrainingLoop::Capture(int64_t epoch,
                                                 int64_t position,
                                                 int64_t epoch_steps) {
  Checkpoint c;
  c.step = step_;
  c.epoch = epoch;
  c.epoch_offset = position;
  c.spec_hash = TrainingHash(spec_);
  c.metadata["job"] = spec_.name();
  c.metadata["epoch_steps"] = absl::StrCat(epoch_steps);
  c.metadata["global_batch"] = absl::StrCat(GlobalBatch());
  // Self-describing: the spec that made it and what its tensors are, so
  // export and inference need nothing else. A metadata value is at most
  // 1 MiB; a larger spec (thousands of layers) is left out rather than
  // failing the checkpoint.
  std::string text;
  if (google::protobuf::TextFormat::PrintToString(spec_, &text) &&
      text.size() < (1 << 20)) {
    c.metadata["job_spec"] = std::move(text);
  }
  std::string names = engine_->StateNames();
  if (names.size() < (1 << 20)) c.metadata["state_names"] = std::move(names);
  CaptureControl(c);
  ASSIGN_OR_RETURN(c.tensors, engine_->CaptureState());
  return c;
}

absl::Status TrainingLoop::FlattenState(const Checkpoint& c,
                                        std::vector<float>* out) const {
  out->clear();
  for (const auto& [name, size] : engine_->StateLayout()) {
    auto t = std::find_if(
        c.tensors.begin(), c.tensors.end(),
        [&name = name](const CheckpointTensor& t) { return t.name == name; });
    if (t == c.tensors.end()) {
      return absl::DataLossError(
          absl::StrCat("checkpoint has no tensor ", name));
    }
    if (static_cast<int64_t>(t->values.size()) != size) {
      return absl::DataLossError(
          absl::StrCat("checkpoint tensor ", name, " has ", t->values.size(),
                       " values, the model needs ", size));
    }
    out->insert(out->end(), t->values.begin(), t->values.end());
  }
  return absl::OkStatus();
}

absl::Status TrainingLoop::Restore(const Checkpoint& c) {
  std::vector<float> flat;
  RETURN_IF_ERROR(FlattenState(c, &flat));
  int64_t epoch_steps = 0;
  auto it = c.metadata.find("epoch_steps");
  if (it != c.metadata.end() && !absl::SimpleAtoi(it->second, &epoch_steps)) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint metadata epoch_steps is not a number: ", it->second));
  }
  if (c.epoch < 0 || c.epoch_offset < 0 ||
      c.epoch_offset > data_.train->size() || epoch_steps < 0) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint's sampler position (epoch ", c.epoch, ", sample ",
        c.epoch_offset, ", step ", epoch_steps, ") does not fit the ",
        data_.train->size(), " training samples"));
  }
  RETURN_IF_ERROR(RestoreControl(c));
  RETURN_IF_ERROR(engine_->RestoreState(flat));
  step_ = c.step;
  restored_step_ = c.step;
  restored_ = true;
  start_epoch_ = c.epoch;
  start_position_ = c.epoch_offset;
  start_epoch_steps_ = epoch_steps;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<Checkpoint>> TrainingLoop::ResumeCandidate() {
  std::optional<Checkpoint> best;
  if (!checkpoint_dir_.empty() && !PsMode()) {
    std::vector<std::string> rejected;
    absl::StatusOr<Checkpoint> c =
        LoadLatestCheckpoint(checkpoint_dir_, &rejected);
    for (const std::string& why : rejected) {
      std::fprintf(stderr, "cohort: skipping a bad checkpoint: %s\n",
                   why.c_str());
    }
    if (!c.ok() && !absl::IsNotFound(c.status())) return c.status();
    if (c.ok()) {
      if (c->spec_hash != TrainingHash(spec_)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the checkpoints in ", checkpoint_dir_,
            " were written by a job with another model, data, optimizer, "
            "batch size, loss or seed; use another checkpoint directory"));
      }
      best = *std::move(c);
    }
  }
  const ElasticState* e = options_.elastic;
  if (e != nullptr && e->snapshot &&
      (!best || e->snapshot->step > best->step)) {
    best = e->snapshot;
  }
  if (best) {
    // A state this model cannot take is refused here, before any peer
    // waits for it.
    std::vector<float> flat;
    RETURN_IF_ERROR(FlattenState(*best, &flat));
    auto it = best->metadata.find("early_stopping");
    if (it != best->metadata.end()) {
      RETURN_IF_ERROR(EarlyStoppingState::Decode(it->second).status());
    }
  }
  return best;
}

// The file of starting weights: --init-from's, the spec's init_from, or
// the initializers of the spec's ONNX graph. `path` names it in messages.
absl::StatusOr<SafetensorsFile> TrainingLoop::StartingWeights(
    std::string* path) const {
  const bool flag = !options_.init_from.empty();
  if (flag || !spec_.init_from().empty()) {
    *path = flag ? options_.init_from : spec_.init_from();
    ASSIGN_OR_RETURN(const std::string bytes,
                     ReadRegularFile(*path, int64_t{64} << 30,
                                     flag ? "--init-from" : "init_from"));
    return ParseSafetensors(bytes, *path);
  }
  *path = spec_.model().onnx();
  ASSIGN_OR_RETURN(const std::string bytes,
                   ReadRegularFile(*path, int64_t{2} << 30, "model.onnx"));
  absl::StatusOr<ImportedModel> imported =
      ImportOnnxBytes(bytes, OnnxImportOptions());
  if (!imported.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(*path, ": ", imported.status().message()));
  }
  SafetensorsFile file;
  for (SafeTensor& t : imported->weights) {
    std::string name = t.name;
    file.tensors.emplace(std::move(name), std::move(t));
  }
  return file;
}

bool TrainingLoop::HasStartingWeights() const {
  return !options_.init_from.empty() || !spec_.init_from().empty() ||
         !spec_.model().onnx().empty();
}

// The starting weights (StartingWeights), into the engine (its optimizer
// state stays fresh).
absl::Status TrainingLoop::InitWeights() {
  std::string path;
  ASSIGN_OR_RETURN(const SafetensorsFile file, StartingWeights(&path));
  // A host model of the spec knows the names and where they go.
  ASSIGN_OR_RETURN(std::unique_ptr<Model<float>> names,
                   BuildModel<float>(spec_.model(), data_.train->sample_shape(),
                                     spec_.seed()));
  ASSIGN_OR_RETURN(const std::vector<LayerSpec> layers,
                   LayerSpecs(spec_.model()));
  Checkpoint c;
  ASSIGN_OR_RETURN(c.tensors, engine_->CaptureState());
  RETURN_IF_ERROR(ApplyWeights(file, path, *names,
                               TorchvisionLayerNames(layers), &c.tensors));
  std::vector<float> flat;
  RETURN_IF_ERROR(FlattenState(c, &flat));
  RETURN_IF_ERROR(engine_->RestoreState(flat));
  if (!options_.quiet) {
    std::fprintf(stderr, "cohort: starting from the weights in %s\n",
                 path.c_str());
  }
  return absl::OkStatus();
}

absl::Status TrainingLoop::OpenLog() {
  if (spec_.log().dir().empty() || (dist_ != nullptr && dist_->rank != 0)) {
    return absl::OkStatus();
  }
  TrainingLogOptions o;
  o.dir = spec_.log().dir();
  o.every_steps = spec_.log().every_steps();
  o.start_step = step_;
  ASSIGN_OR_RETURN(log_, TrainingLog::Open(o));
  // The epoch of the step training starts from, for an evaluation before
  // the next step: a state at an epoch's start ended the epoch before.
  const bool epoch_start = start_epoch_steps_ == 0 && start_position_ == 0;
  logged_.epoch =
      epoch_start ? std::max<int64_t>(0, start_epoch_ - 1) : start_epoch_;
  return absl::OkStatus();
}

absl::Status TrainingLoop::Resume() {
  RETURN_IF_ERROR(ResumeTrainingState());
  LoadExchangeState();
  return absl::OkStatus();
}

absl::Status TrainingLoop::ResumeTrainingState() {
  ASSIGN_OR_RETURN(std::optional<Checkpoint> mine, ResumeCandidate());
  // A checkpoint to resume wins over starting weights.
  if (!mine && HasStartingWeights()) {
    RETURN_IF_ERROR(InitWeights());
  }
  if (dist_ != nullptr && !PsMode() && dist_->comm != nullptr) {
    return AgreeOnState(mine);
  }
  if (!mine) return absl::OkStatus();  // a fresh run
  RETURN_IF_ERROR(Restore(*mine));
  // Not progress but what the run does, so --quiet keeps it.
  std::fprintf(
      stderr,
      "cohort: resuming from step %lld (epoch %lld, sample %lld) "
      "of %s\n",
      static_cast<long long>(step_), static_cast<long long>(start_epoch_ + 1),
      static_cast<long long>(start_position_), checkpoint_dir_.c_str());
  NoteGlobalBatch(MetadataInt(*mine, "global_batch"));
  return absl::OkStatus();
}

int64_t TrainingLoop::GlobalBatch() const {
  return spec_.batch_size() * accumulation_ * TotalReplicas();
}

// The learning rate suits the global batch it was tuned for; a checkpoint
// from a world of another size resumes with another one, which the user
// may not expect. Said once, by whoever logs for the job.
void TrainingLoop::NoteGlobalBatch(int64_t written) {
  const int64_t now = GlobalBatch();
  if (written <= 0 || written == now) return;
  if (dist_ != nullptr && dist_->rank != 0) return;
  const std::string fix =
      spec_.optimizer().scale_lr_with_world()
          ? std::string(
                "optimizer.scale_lr_with_world scales the learning "
                "rate with it")
          : absl::StrCat(
                "by the linear scaling rule, multiply optimizer.lr "
                "by ",
                static_cast<double>(now) / written,
                " (or set optimizer.scale_lr_with_world: true)");
  std::fprintf(stderr,
               "cohort: the global batch changes on resume: step %lld was "
               "trained with %lld samples a step, this run takes %lld (%d "
               "replicas x batch %d%s); %s\n",
               static_cast<long long>(step_), static_cast<long long>(written),
               static_cast<long long>(now), TotalReplicas(), spec_.batch_size(),
               accumulation_ > 1
                   ? absl::StrCat(" x ", accumulation_, " accumulated").c_str()
                   : "",
               fix.c_str());
}

// Every rank holds the same state after the same step in a synchronous
// job, so whichever rank holds the newest one can give it to the others.
// Both collectives are sums in which only one rank adds non-zero values,
// which is a broadcast the Communicator interface already has.
absl::Status TrainingLoop::AgreeOnState(const std::optional<Checkpoint>& mine) {
  const absl::Time start = absl::Now();
  const int world = dist_->world_size;
  std::vector<float> steps(world * kIntFloats, 0.0f);
  if (mine) PutInt(mine->step + 1, &steps[dist_->rank * kIntFloats]);
  RETURN_IF_ERROR(dist_->comm->AllReduceSum(steps.data(), steps.size()));
  int source = -1;
  int64_t newest = 0;
  for (int w = 0; w < world; ++w) {
    const int64_t v = GetInt(&steps[w * kIntFloats]);
    if (v > newest) {
      newest = v;
      source = w;
    }
  }
  if (source < 0) return absl::OkStatus();  // nobody has trained yet
  Trace("agree on state", Timeline::kStepLane, start);
  constexpr int kHeader = (5 + kControlInts) * kIntFloats;
  const std::vector<std::pair<std::string, int64_t>> layout =
      engine_->StateLayout();
  std::vector<float> flat;
  if (dist_->rank == source) {
    RETURN_IF_ERROR(FlattenState(*mine, &flat));
    flat.insert(flat.begin(), kHeader, 0.0f);
    PutInt(mine->step, &flat[0]);
    PutInt(mine->epoch, &flat[kIntFloats]);
    PutInt(mine->epoch_offset, &flat[2 * kIntFloats]);
    PutInt(EpochSteps(*mine), &flat[3 * kIntFloats]);
    PutInt(MetadataInt(*mine, "global_batch"), &flat[4 * kIntFloats]);
    PutControl(*mine, &flat[5 * kIntFloats]);
  } else {
    int64_t n = kHeader;
    for (const auto& entry : layout) n += entry.second;
    flat.assign(n, 0.0f);
  }
  RETURN_IF_ERROR(dist_->comm->AllReduceSum(flat.data(), flat.size()));
  Checkpoint c;
  c.step = GetInt(&flat[0]);
  c.epoch = GetInt(&flat[kIntFloats]);
  c.epoch_offset = GetInt(&flat[2 * kIntFloats]);
  c.metadata["epoch_steps"] = absl::StrCat(GetInt(&flat[3 * kIntFloats]));
  const int64_t written_batch = GetInt(&flat[4 * kIntFloats]);
  c.metadata["early_stopping"] = GetControl(&flat[5 * kIntFloats]);
  const float* from = flat.data() + kHeader;
  for (const auto& [name, size] : layout) {
    c.tensors.push_back({name, {size}, {from, from + size}});
    from += size;
  }
  RETURN_IF_ERROR(Restore(c));
  // Every rank says it (cohort local shows each worker's line), quiet or not.
  std::fprintf(stderr,
               "cohort: rank %d resuming from step %lld (epoch %lld, sample "
               "%lld), the newest state in the job, held by rank %d\n",
               dist_->rank, static_cast<long long>(step_),
               static_cast<long long>(start_epoch_ + 1),
               static_cast<long long>(start_position_), source);
  NoteGlobalBatch(written_batch);
  return absl::OkStatus();
}

absl::Status TrainingLoop::StopWithFinalCheckpoint() {
  std::string where;
  if (Checkpoints()) {
    CheckpointWriteOptions o;
    o.keep = spec_.checkpoint().keep();
    const absl::Time start = absl::Now();
    ASSIGN_OR_RETURN(Checkpoint c,
                     Capture(cur_epoch_, cur_position_, cur_epoch_steps_));
    RETURN_IF_ERROR(WriteOrFail(checkpoint_dir_, c, o));
    Trace("checkpoint", Timeline::kStepLane, start, absl::Now(),
          absl::StrCat("\"step\": ", step_, ", \"final\": true"));
    where = absl::StrCat("; final checkpoint in ", checkpoint_dir_);
  }
  return absl::CancelledError(absl::StrCat(
      "stopped by a termination signal after step ", step_, where));
}

void TrainingLoop::SaveForNextGeneration() {
  ElasticState* e = options_.elastic;
  if (e == nullptr || PsMode()) return;
  absl::StatusOr<Checkpoint> c =
      Capture(cur_epoch_, cur_position_, cur_epoch_steps_);
  if (!c.ok()) {
    std::fprintf(stderr,
                 "cohort: cannot keep the state for the next "
                 "generation: %s\n",
                 std::string(c.status().message()).c_str());
    return;
  }
  e->snapshot = *std::move(c);
  e->exchange_state = exchange_->SaveState();
  e->exchange_step = step_;
  TrainResult& carried = e->carried;
  carried.samples += result_.samples;
  carried.train_seconds += result_.train_seconds;
  // The epoch this generation ended in: its time and figures so far.
  if (epoch_start_ != absl::InfinitePast()) {
    carried.train_seconds += absl::ToDoubleSeconds(absl::Now() - epoch_start_);
    e->partial = {cur_epoch_, epoch_loss_steps_, epoch_loss_sum_,
                  epoch_correct_, epoch_seen_};
  }
  carried.eval_seconds += result_.eval_seconds;
  carried.skipped_steps += result_.skipped_steps;
  carried.skipped_samples += result_.skipped_samples;
  carried.epoch_results.insert(carried.epoch_results.end(),
                               result_.epoch_results.begin(),
                               result_.epoch_results.end());
}

void TrainingLoop::AddCarried() {
  const ElasticState* e = options_.elastic;
  if (e == nullptr) return;
  const TrainResult& c = e->carried;
  result_.samples += c.samples;
  result_.train_seconds += c.train_seconds;
  result_.eval_seconds += c.eval_seconds;
  result_.skipped_steps += c.skipped_steps;
  result_.skipped_samples += c.skipped_samples;
  result_.epoch_results.insert(result_.epoch_results.begin(),
                               c.epoch_results.begin(), c.epoch_results.end());
  // Epochs begun over all generations.
  result_.epochs = std::max<int64_t>(
      result_.epochs, cur_epoch_ + (cur_epoch_steps_ > 0 ? 1 : 0));
}

// The run's last step, unless a periodic checkpoint has just saved it or
// this run took no step (what it resumed from is that state): a finished
// run always leaves its final state behind.
absl::Status TrainingLoop::FinalCheckpoint() {
  if (!Checkpoints() || last_checkpoint_step_ == step_ ||
      (steps_this_run_ == 0 && restored_)) {
    return absl::OkStatus();
  }
  CheckpointWriteOptions o;
  o.keep = spec_.checkpoint().keep();
  const absl::Time start = absl::Now();
  // cur_*: where the next step would start (the next epoch after a
  // complete one).
  ASSIGN_OR_RETURN(Checkpoint c,
                   Capture(cur_epoch_, cur_position_, cur_epoch_steps_));
  RETURN_IF_ERROR(WriteOrFail(checkpoint_dir_, c, o));
  last_checkpoint_step_ = step_;
  Trace("checkpoint", Timeline::kStepLane, start, absl::Now(),
        absl::StrCat("\"step\": ", step_, ", \"final\": true"));
  return absl::OkStatus();
}

absl::Status TrainingLoop::MaybeCheckpoint(int64_t epoch,
                                           int64_t steps_in_epoch,
                                           int64_t batches) {
  if (!Checkpoints()) return absl::OkStatus();
  const CheckpointSpec& cs = spec_.checkpoint();
  const bool by_steps = cs.every_steps() > 0 && step_ % cs.every_steps() == 0;
  const bool by_time =
      cs.every_seconds() > 0 &&
      absl::Now() - last_checkpoint_ >= absl::Seconds(cs.every_seconds());
  if (!by_steps && !by_time) return absl::OkStatus();
  // A finished epoch resumes at the start of the next one.
  const bool epoch_done = steps_in_epoch >= batches;
  CheckpointWriteOptions o;
  o.keep = cs.keep();
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(Checkpoint c,
                   epoch_done ? Capture(epoch + 1, 0, 0)
                              : Capture(epoch, cur_position_, steps_in_epoch));
  RETURN_IF_ERROR(WriteOrFail(checkpoint_dir_, c, o));
  last_checkpoint_ = absl::Now();
  last_checkpoint_step_ = step_;
  Trace("checkpoint", Timeline::kStepLane, start, last_checkpoint_,
        absl::StrCat("\"step\": ", step_));
  return absl::OkStatus();
}

}  // namespace cohort

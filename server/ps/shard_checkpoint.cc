#include "server/ps/shard_checkpoint.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "proto/ps.pb.h"

namespace cohort {
namespace {

constexpr char kKind[] = "ps-shard";
// No real job has more workers than this; a bound on what a file may make
// the shard allocate for its seq table.
constexpr int kMaxSeqEntries = 1 << 20;

std::string ParamsName(const Partition& p) {
  return absl::StrCat("p", p.id(), "/params");
}
std::string OptimizerName(const Partition& p, int k) {
  return absl::StrCat("p", p.id(), "/opt", k);
}
std::string TableTensor(const SparseTableInfo& t, absl::string_view what) {
  return absl::StrCat("t", t.id(), "/", what);
}

// Integers below 2^48 as two float tensors of 24 bits each (floats hold
// integers below 2^24 exactly): high and low parts.
constexpr int64_t kLowBits = 24;
constexpr int64_t kLowMask = (int64_t{1} << kLowBits) - 1;

std::pair<std::vector<float>, std::vector<float>> SplitInts(
    const std::vector<int64_t>& v) {
  std::vector<float> hi(v.size()), lo(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    hi[i] = static_cast<float>(v[i] >> kLowBits);
    lo[i] = static_cast<float>(v[i] & kLowMask);
  }
  return {std::move(hi), std::move(lo)};
}

// The integers SplitInts encoded; DATA_LOSS naming the tensor for a part
// that is not an integer in [0, 2^24) or parts of different lengths.
absl::StatusOr<std::vector<int64_t>> JoinInts(const std::vector<float>& hi,
                                              const std::vector<float>& lo,
                                              const std::string& path,
                                              const std::string& name) {
  if (hi.size() != lo.size()) {
    return absl::DataLossError(absl::StrCat(path, ": ", name, " has ",
                                            hi.size(), " high and ", lo.size(),
                                            " low parts"));
  }
  std::vector<int64_t> out(hi.size());
  for (size_t i = 0; i < hi.size(); ++i) {
    for (float part : {hi[i], lo[i]}) {
      if (!(part >= 0 && part <= kLowMask) ||
          part != static_cast<float>(static_cast<int64_t>(part))) {
        return absl::DataLossError(
            absl::StrCat(path, ": ", name, " entry ", i, " has part ", part,
                         ", not an integer in [0, 2^24)"));
      }
    }
    out[i] =
        (static_cast<int64_t>(hi[i]) << kLowBits) | static_cast<int64_t>(lo[i]);
  }
  return out;
}

void PutTable(const SparseTableInfo& t, const RowStore::Contents& rows,
              std::vector<CheckpointTensor>* out) {
  const int64_t n = rows.ids.size();
  auto [hi, lo] = SplitInts(rows.ids);
  out->push_back({TableTensor(t, "ids_hi"), {n}, std::move(hi)});
  out->push_back({TableTensor(t, "ids_lo"), {n}, std::move(lo)});
  out->push_back({TableTensor(t, "values"),
                  {static_cast<int64_t>(rows.values.size())},
                  rows.values});
  out->push_back({TableTensor(t, "state"),
                  {static_cast<int64_t>(rows.state.size())},
                  rows.state});
  auto [steps_hi, steps_lo] = SplitInts({rows.steps});
  out->push_back({TableTensor(t, "steps"), {2}, {steps_hi[0], steps_lo[0]}});
}

void PutRanges(
    const std::map<int64_t, int64_t>& ranges,
    google::protobuf::RepeatedPtrField<ShardCheckpointState::ChunkRange>* out) {
  for (const auto& [first, end] : ranges) {
    ShardCheckpointState::ChunkRange* r = out->Add();
    r->set_first(first);
    r->set_end(end);
  }
}

std::map<int64_t, int64_t> GetRanges(
    const google::protobuf::RepeatedPtrField<ShardCheckpointState::ChunkRange>&
        in) {
  std::map<int64_t, int64_t> out;
  for (const auto& r : in) out[r.first()] = r.end();
  return out;
}

using TakeTensor =
    std::function<absl::StatusOr<std::vector<float>>(const std::string&)>;

// Table `t`'s stored rows (PutTable's tensors), from `take`.
absl::StatusOr<RowStore::Contents> DecodeTableRows(const SparseTableInfo& t,
                                                   const TakeTensor& take,
                                                   const std::string& path) {
  RowStore::Contents rows;
  ASSIGN_OR_RETURN(std::vector<float> hi, take(TableTensor(t, "ids_hi")));
  ASSIGN_OR_RETURN(std::vector<float> lo, take(TableTensor(t, "ids_lo")));
  ASSIGN_OR_RETURN(rows.ids,
                   JoinInts(hi, lo, path, TableTensor(t, "ids_hi/lo")));
  ASSIGN_OR_RETURN(rows.values, take(TableTensor(t, "values")));
  ASSIGN_OR_RETURN(rows.state, take(TableTensor(t, "state")));
  ASSIGN_OR_RETURN(std::vector<float> steps, take(TableTensor(t, "steps")));
  if (steps.size() != 2) {
    return absl::DataLossError(absl::StrCat(path, ": ", TableTensor(t, "steps"),
                                            " has ", steps.size(),
                                            " values, not 2"));
  }
  ASSIGN_OR_RETURN(
      std::vector<int64_t> count,
      JoinInts({steps[0]}, {steps[1]}, path, TableTensor(t, "steps")));
  rows.steps = count[0];
  return rows;
}

// Partitions in id order, so that two layouts compare as sets.
std::vector<Partition> ById(std::vector<Partition> v) {
  std::sort(v.begin(), v.end(), [](const Partition& a, const Partition& b) {
    return a.id() < b.id();
  });
  return v;
}

std::string Describe(const std::vector<Partition>& layout) {
  std::vector<std::string> parts;
  for (const Partition& p : ById(layout)) {
    parts.push_back(absl::StrCat(p.id(), "@", p.offset(), "+", p.count()));
  }
  return absl::StrCat("[", absl::StrJoin(parts, " "), "]");
}

bool SameLayout(const std::vector<Partition>& a,
                const std::vector<Partition>& b) {
  if (a.size() != b.size()) return false;
  const std::vector<Partition> x = ById(a), y = ById(b);
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].id() != y[i].id() || x[i].shard() != y[i].shard() ||
        x[i].offset() != y[i].offset() || x[i].count() != y[i].count()) {
      return false;
    }
  }
  return true;
}

// The checks against the job and the coordinator's view, before any tensor
// is looked at.
absl::Status CheckIdentity(const Checkpoint& ckpt,
                           const ShardCheckpointState& st,
                           const std::string& path, const JobSpec& job,
                           const ShardRestoreCheck& expect) {
  auto refuse = [&path](const std::string& why) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": cannot restore from it: ", why));
  };
  if (ckpt.spec_hash != TrainingHash(job)) {
    return refuse(
        "it was written by a job with another model, data, optimizer, "
        "batch size, loss, seed or consistency model");
  }
  if (!expect.run_id.empty() && st.run_id() != expect.run_id) {
    return refuse(absl::StrCat("it was written by another run of the job (run ",
                               st.run_id(), ", this run is ", expect.run_id,
                               ")"));
  }
  if (st.shard_index() != expect.shard_index) {
    return refuse(absl::StrCat("it holds shard ", st.shard_index(),
                               ", not shard ", expect.shard_index));
  }
  if (ckpt.step != st.version()) {
    return absl::DataLossError(absl::StrCat(
        path, ": step ", ckpt.step, " but shard version ", st.version()));
  }
  const std::vector<Partition> layout(st.partitions().begin(),
                                      st.partitions().end());
  if (!expect.partitions.empty() && !SameLayout(layout, expect.partitions)) {
    return refuse(absl::StrCat(
        "its partitions ", Describe(layout), " are not the job's for shard ",
        expect.shard_index, " ", Describe(expect.partitions)));
  }
  if (expect.world_size > 0 && (st.world_size() != expect.world_size ||
                                st.total_replicas() != expect.total_replicas)) {
    return refuse(absl::StrCat("it is of ", st.world_size(), " workers and ",
                               st.total_replicas(), " replicas, the job has ",
                               expect.world_size, " and ",
                               expect.total_replicas));
  }
  return absl::OkStatus();
}

}  // namespace

std::string ShardCheckpointDir(const std::string& checkpoint_dir,
                               int shard_index) {
  const bool slash = !checkpoint_dir.empty() && checkpoint_dir.back() == '/';
  return absl::StrCat(checkpoint_dir, slash ? "" : "/", "shard-", shard_index);
}

Checkpoint EncodeShardCheckpoint(const ShardState::Capture& c,
                                 const JobSpec& job,
                                 const std::string& run_id) {
  ShardCheckpointState st;
  st.set_shard_index(c.shard_index);
  st.set_run_id(run_id);
  st.set_consistency(c.consistency);
  st.set_world_size(c.world_size);
  st.set_total_replicas(c.total_replicas);
  for (const Partition& p : c.partitions) *st.add_partitions() = p;
  st.set_version(c.version);
  st.set_optimizer_tensors(
      c.optimizer_state.empty() ? 0 : c.optimizer_state[0].size());
  for (int64_t clock : c.clocks) st.add_clocks(clock);
  st.set_next_sync_clock(c.next_sync_clock);
  st.set_watermark(c.watermark);
  PutRanges(c.applied_ahead, st.mutable_applied_ahead());
  PutRanges(c.forgiven, st.mutable_forgiven());
  for (const auto& [worker, seq] : c.last_seq) {
    ShardCheckpointState::WorkerSeq* w = st.add_last_seq();
    w->set_worker_id(worker);
    w->set_seq(seq);
  }
  Checkpoint ckpt;
  ckpt.step = c.version;
  ckpt.spec_hash = TrainingHash(job);
  ckpt.metadata["kind"] = kKind;
  for (const SparseTableInfo& t : c.tables) *st.add_tables() = t;
  ckpt.metadata["ps_state"] = st.SerializeAsString();
  for (size_t i = 0; i < c.partitions.size(); ++i) {
    const Partition& p = c.partitions[i];
    ckpt.tensors.push_back({ParamsName(p), {p.count()}, *c.params[i]});
    for (size_t k = 0; k < c.optimizer_state[i].size(); ++k) {
      const std::vector<float>& v = c.optimizer_state[i][k];
      ckpt.tensors.push_back(
          {OptimizerName(p, k), {static_cast<int64_t>(v.size())}, v});
    }
  }
  for (size_t i = 0; i < c.tables.size(); ++i) {
    PutTable(c.tables[i], c.rows[i], &ckpt.tensors);
  }
  return ckpt;
}

ShardRestoreCheck RestoreCheckOf(const RegisterShardResponse& a) {
  ShardRestoreCheck e;
  e.shard_index = a.shard_index();
  e.run_id = a.run_id();
  e.partitions.assign(a.partitions().begin(), a.partitions().end());
  e.world_size = a.world_size();
  e.total_replicas = a.total_replicas();
  return e;
}

absl::StatusOr<ShardState::Capture> DecodeShardCheckpoint(
    Checkpoint ckpt, const std::string& path, const JobSpec& job,
    const ShardRestoreCheck& expect) {
  auto kind = ckpt.metadata.find("kind");
  auto state = ckpt.metadata.find("ps_state");
  if (kind == ckpt.metadata.end() || kind->second != kKind ||
      state == ckpt.metadata.end()) {
    return absl::DataLossError(absl::StrCat(
        path, ": not a parameter-server shard checkpoint (no ps_state)"));
  }
  ShardCheckpointState st;
  if (!st.ParseFromString(state->second)) {
    return absl::DataLossError(
        absl::StrCat(path, ": its ps_state does not parse"));
  }
  RETURN_IF_ERROR(CheckIdentity(ckpt, st, path, job, expect));
  if (st.last_seq_size() > kMaxSeqEntries || st.optimizer_tensors() < 0 ||
      st.optimizer_tensors() > 16) {
    return absl::DataLossError(absl::StrCat(
        path, ": ", st.last_seq_size(), " seq entries or ",
        st.optimizer_tensors(), " optimizer tensors is out of range"));
  }
  std::map<std::string, CheckpointTensor*> tensors;
  for (CheckpointTensor& t : ckpt.tensors) tensors[t.name] = &t;
  auto take =
      [&](const std::string& name) -> absl::StatusOr<std::vector<float>> {
    auto it = tensors.find(name);
    if (it == tensors.end()) {
      return absl::DataLossError(absl::StrCat(path, ": has no tensor ", name));
    }
    return std::move(it->second->values);
  };
  ShardState::Capture c;
  c.shard_index = st.shard_index();
  c.consistency = st.consistency();
  c.world_size = st.world_size();
  c.total_replicas = st.total_replicas();
  c.version = st.version();
  for (const Partition& p : st.partitions()) {
    c.partitions.push_back(p);
    ASSIGN_OR_RETURN(std::vector<float> params, take(ParamsName(p)));
    if (static_cast<int64_t>(params.size()) != p.count()) {
      return absl::DataLossError(absl::StrCat(path, ": ", ParamsName(p),
                                              " has ", params.size(),
                                              " values, not ", p.count()));
    }
    c.params.push_back(
        std::make_shared<const std::vector<float>>(std::move(params)));
    std::vector<std::vector<float>> opt;
    for (int k = 0; k < st.optimizer_tensors(); ++k) {
      ASSIGN_OR_RETURN(std::vector<float> v, take(OptimizerName(p, k)));
      opt.push_back(std::move(v));
    }
    c.optimizer_state.push_back(std::move(opt));
  }
  for (const SparseTableInfo& t : st.tables()) {
    c.tables.push_back(t);
    ASSIGN_OR_RETURN(RowStore::Contents rows, DecodeTableRows(t, take, path));
    c.rows.push_back(std::move(rows));
  }
  c.clocks.assign(st.clocks().begin(), st.clocks().end());
  c.next_sync_clock = st.next_sync_clock();
  c.watermark = st.watermark();
  c.applied_ahead = GetRanges(st.applied_ahead());
  c.forgiven = GetRanges(st.forgiven());
  for (const auto& w : st.last_seq()) c.last_seq[w.worker_id()] = w.seq();
  return c;
}

absl::StatusOr<LoadedShardCheckpoint> LoadShardCheckpoint(
    const JobSpec& job, const ShardRestoreCheck& expect) {
  const std::string dir =
      ShardCheckpointDir(job.checkpoint().dir(), expect.shard_index);
  LoadedShardCheckpoint out;
  ASSIGN_OR_RETURN(Checkpoint ckpt, LoadLatestCheckpoint(dir, &out.rejected));
  out.path = absl::StrCat(dir, "/", CheckpointFileName(ckpt.step));
  ASSIGN_OR_RETURN(out.capture, DecodeShardCheckpoint(std::move(ckpt), out.path,
                                                      job, expect));
  return out;
}

absl::StatusOr<int> RemoveShardCheckpoints(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return 0;
    return absl::UnavailableError(absl::StrCat(
        "cannot list checkpoint directory ", dir, ": ", std::strerror(errno)));
  }
  std::vector<std::string> names;
  while (struct dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    // Committed files and the temp files of writers that died.
    if (absl::StartsWith(name, "ckpt-") && absl::StrContains(name, ".cohort")) {
      names.push_back(name);
    }
  }
  closedir(d);
  int removed = 0;
  for (const std::string& name : names) {
    const std::string path = absl::StrCat(dir, "/", name);
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return absl::UnavailableError(absl::StrCat(
          "cannot remove ", path, ": ", std::strerror(errno),
          " (a restore could take this earlier run's checkpoint)"));
    }
    ++removed;
  }
  return removed;
}

ShardCheckpointer::ShardCheckpointer(ShardState* state, std::string dir,
                                     int keep, JobSpec job, std::string run_id,
                                     int shard_index)
    : state_(state),
      dir_(std::move(dir)),
      keep_(std::max(1, keep)),
      job_(std::move(job)),
      run_id_(std::move(run_id)),
      shard_index_(shard_index),
      thread_([this] { Loop(); }) {}

ShardCheckpointer::~ShardCheckpointer() {
  if (thread_.joinable()) thread_.join();
}

void ShardCheckpointer::Loop() {
  bool logged = false;
  while (true) {
    absl::StatusOr<ShardState::Capture> capture = state_->NextCapture();
    if (!capture.ok()) return;  // the shard is shutting down
    const int64_t version = capture->version;
    const Checkpoint ckpt = EncodeShardCheckpoint(*capture, job_, run_id_);
    // The shared parameters go before the slow part, so that updates in the
    // meantime do not have to copy them.
    capture = absl::UnavailableError("written");
    CheckpointWriteOptions o;
    o.keep = keep_;
    const absl::Status s = WriteCheckpoint(dir_, ckpt, o);
    if (!s.ok()) {
      LOG(ERROR) << "shard " << shard_index_
                 << ": cannot write the checkpoint of version " << version
                 << ": " << s.message()
                 << " (a restart would lose the updates since the last one)";
    } else if (!logged) {
      LOG(INFO) << "shard " << shard_index_ << ": checkpoint of version "
                << version << " written to " << dir_;
      logged = true;
    }
    state_->CaptureDone(version, s.ok());
  }
}

}  // namespace cohort

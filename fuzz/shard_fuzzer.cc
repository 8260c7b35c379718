// Fuzzes the parameter-server shard's request handling
// (server/ps/shard_state.h, shard_rows.h) with the RPCs of a
// fuzz/shard_fuzz.proto case, replayed as ShardServer's service does: Init
// and Push streams go through CheckInit/CheckPush, a ChunkAssembler (and,
// for a push's row chunks, a RowAssembler over sparse_layout()) and
// Init/ApplyPush; Pull and PullRows get a deadline already passed. The
// job's optimizer is sometimes one the sparse tables accept, sometimes not.
//
// Properties: nothing crashes or trips a sanitizer; every refusal has one
// of the codes the service documents; versions never go back; a pull's
// snapshot matches the layout, a PullRows answer the request; Init accepts
// sparse tables only with an optimizer that steps rows; PullRows never
// changes the rows held; and those of fuzz/shard_row_tracker.h (rows never
// pushed read as their initial value, rows pushed only tame gradients stay
// finite, rows held never exceed the ids pushed, a refused push changes no
// row). After Shutdown every pull is UNAVAILABLE.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/proto_mutator.h"
#include "fuzz/shard_fuzz.pb.h"
#include "fuzz/shard_row_tracker.h"
#include "proto/job.pb.h"
#include "proto/ps.pb.h"
#include "server/ps/shard_rows.h"
#include "server/ps/shard_state.h"
#include "server/request_checks.h"

namespace cohort {
namespace {

using InitStream = google::protobuf::RepeatedPtrField<InitRequest>;
using PushStream = google::protobuf::RepeatedPtrField<PushRequest>;

// Layouts above this many elements are skipped: each input must run in
// microseconds, and the shard allocates a layout's buffers before the
// chunks arrive.
constexpr int64_t kMaxElements = int64_t{1} << 16;
// Sparse tables are bounded alike: a pulled row costs dim floats however
// often the request repeats its id, and rows beyond what an input can name
// would only make every random id valid.
constexpr int kMaxTables = 4;
constexpr int64_t kMaxTableRows = int64_t{1} << 16;
constexpr int32_t kMaxTableDim = 64;

constexpr OptimizerSpec::Kind kKinds[] = {
    OptimizerSpec::SGD, OptimizerSpec::ADAM, OptimizerSpec::ADAMW,
    OptimizerSpec::ADAGRAD};

int Mod(int32_t v, int n) {
  return static_cast<int>(static_cast<uint32_t>(v) % n);
}

JobSpec MakeJob(const fuzz::ShardFuzzCase& c) {
  JobSpec job;
  job.mutable_ps()->set_consistency(
      static_cast<Consistency>(Mod(c.consistency(), 3)));
  job.mutable_ps()->set_shards(1 + Mod(c.shards(), 4));
  OptimizerSpec* o = job.mutable_optimizer();
  o->set_kind(kKinds[Mod(c.optimizer(), 4)]);
  // The defaults ParseJobSpec fills in, and settings without a row-wise
  // form unless the case asks for one.
  o->set_lr(0.1f);
  o->set_momentum(o->kind() == OptimizerSpec::SGD && !c.row_wise() ? 0.9f
                                                                   : 0.0f);
  o->set_weight_decay(c.row_wise() ? 0.0f : 0.01f);
  o->set_beta1(0.9f);
  o->set_beta2(0.999f);
  o->set_eps(1e-8f);
  return job;
}

// Whether the sparse tables accept the job's optimizer
// (kernels/sparse_update_rules.h): what PyTorch steps sparse gradients with.
bool TablesAccept(const OptimizerSpec& o) {
  return o.kind() != OptimizerSpec::ADAMW && o.momentum() == 0 &&
         o.weight_decay() == 0;
}

// What a case has seen so far.
struct Seen {
  Consistency consistency = SYNC;
  bool tables_accept = false;
  int64_t version = 0;
  fuzz::RowTracker rows;
};

bool Expected(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kDeadlineExceeded:  // a pull that would wait
      return true;
    default:
      return false;
  }
}

absl::StatusOr<std::vector<std::vector<float>>> AssembleInit(
    const InitStream& stream, const std::vector<Partition>& layout,
    std::string what) {
  ChunkAssembler assembler(layout, std::move(what));
  for (int i = 1; i < stream.size(); ++i) {
    if (!stream[i].has_chunk()) {
      return absl::InvalidArgumentError("a second header in the stream");
    }
    RETURN_IF_ERROR(assembler.Add(stream[i].chunk()));
  }
  return assembler.Finish();
}

// The elements of a layout CheckInit accepted (counts >= 1), saturating.
int64_t TotalElements(const InitHeader& h) {
  int64_t total = 0;
  for (const Partition& p : h.partitions()) {
    if (__builtin_add_overflow(total, p.count(), &total)) return INT64_MAX;
  }
  return total;
}

bool TablesTooLarge(const InitHeader& h) {
  if (h.tables_size() > kMaxTables) return true;
  for (const SparseTableInfo& t : h.tables()) {
    if (t.rows() > kMaxTableRows || t.dim() > kMaxTableDim) return true;
  }
  return false;
}

absl::Status DoInit(ShardState& state, const InitStream& stream,
                    const Seen& seen) {
  if (!stream[0].has_header()) {
    return absl::InvalidArgumentError("the first message must be the header");
  }
  const InitHeader& header = stream[0].header();
  ASSIGN_OR_RETURN(const bool already, state.CheckInit(header));
  FUZZ_CHECK(header.tables().empty() || seen.tables_accept,
             "CheckInit accepted sparse tables with an optimizer that has no "
             "row-wise form");
  if (already) return absl::OkStatus();
  const int64_t elements = TotalElements(header);
  if (fuzz::CheckKnownBugs()) {  // F
    FUZZ_CHECK(elements <= kMaxParamElements,
               absl::StrCat("CheckInit accepted a layout of ", elements,
                            " elements, all allocated before any chunk"));
  }
  if (elements > kMaxElements || TablesTooLarge(header)) {
    return absl::OkStatus();
  }
  const std::vector<Partition> layout(header.partitions().begin(),
                                      header.partitions().end());
  ASSIGN_OR_RETURN(std::vector<std::vector<float>> values,
                   AssembleInit(stream, layout, "init"));
  RETURN_IF_ERROR(state.Init(header, std::move(values)).status());
  FUZZ_CHECK(static_cast<int>(state.sparse_layout().tables.size()) ==
                 header.tables_size(),
             "the shard's sparse layout differs from its Init's tables");
  return absl::OkStatus();
}

// A push as the service reads it: true if applied, false if acknowledged
// as a duplicate.
absl::StatusOr<bool> DoPush(ShardState& state, const PushStream& stream,
                            Seen& seen) {
  if (!stream[0].has_header()) {
    return absl::InvalidArgumentError("the first message must be the header");
  }
  const PushHeader& header = stream[0].header();
  ASSIGN_OR_RETURN(const std::vector<Partition> layout,
                   state.CheckPush(header));
  const std::string what = absl::StrCat("push from rank ", header.rank());
  ChunkAssembler chunks(layout, what, state.TakeStaging());
  RowAssembler rows(state.sparse_layout(), what);
  for (int i = 1; i < stream.size(); ++i) {
    if (stream[i].has_chunk()) {
      RETURN_IF_ERROR(chunks.Add(stream[i].chunk()));
    } else if (stream[i].has_rows()) {
      RETURN_IF_ERROR(rows.Add(stream[i].rows()));
    } else {
      return absl::InvalidArgumentError("a second header in the stream");
    }
  }
  ASSIGN_OR_RETURN(std::vector<std::vector<float>> grads, chunks.Finish());
  PushedRows pushed = rows.Finish();
  PushedRows ids;  // the ids alone, to note once applied
  for (const PushedRows::Table& t : pushed.tables)
    ids.tables.push_back({t.ids});
  ASSIGN_OR_RETURN(
      const PushResponse r,
      state.ApplyPush(header, std::move(grads), std::move(pushed)));
  FUZZ_CHECK(r.version() >= seen.version, "version went back after a push");
  seen.version = r.version();
  if (!r.duplicate()) seen.rows.NoteApplied(ids);
  return !r.duplicate();
}

// DoPush, checking that a push the shard refuses or acknowledges as a
// duplicate changes no row.
absl::Status CheckedPush(ShardState& state, const PushStream& stream,
                         Seen& seen) {
  seen.rows.NoteSent(stream);
  const fuzz::RowTracker::Seen before = seen.rows.Observe(state);
  const absl::StatusOr<bool> applied = DoPush(state, stream, seen);
  if (!applied.ok() || !*applied) {
    fuzz::RowTracker::CheckUnchanged(
        before, seen.rows.Observe(state),
        applied.ok() ? "a duplicate push"
                     : fuzz::Describe("a refused push", applied.status()));
  }
  return applied.status();
}

absl::Status DoPull(ShardState& state, const PullRequest& pull, Seen& seen) {
  ASSIGN_OR_RETURN(
      const ShardState::Snapshot snap,
      state.WaitForPull(pull.rank(), pull.clock(), absl::InfinitePast()));
  FUZZ_CHECK(snap.version >= seen.version, "version went back in a pull");
  seen.version = snap.version;
  FUZZ_CHECK(snap.partitions.size() == snap.values.size(),
             "snapshot values do not match its partitions");
  for (size_t i = 0; i < snap.partitions.size(); ++i) {
    FUZZ_CHECK(static_cast<int64_t>(snap.values[i]->size()) ==
                   snap.partitions[i].count(),
               absl::StrCat("snapshot partition ", i, " has ",
                            snap.values[i]->size(), " values"));
  }
  return absl::OkStatus();
}

absl::Status DoPullRows(ShardState& state, const PullRowsRequest& request,
                        Seen& seen) {
  const int64_t held = state.Stats().rows_held();
  const absl::StatusOr<ShardState::RowsSnapshot> snap =
      state.PullRows(request, absl::InfinitePast());
  FUZZ_CHECK(state.Stats().rows_held() == held,
             fuzz::Describe("PullRows changed the rows held", snap.status()));
  RETURN_IF_ERROR(snap.status());
  FUZZ_CHECK(snap->version >= seen.version, "version went back in PullRows");
  seen.version = snap->version;
  seen.rows.CheckPulled(state.sparse_layout(), request, *snap);
  return absl::OkStatus();
}

// Known bugs (reported, in server/ps/shard_state.cc): wire fields used
// before they are bounded, in signed arithmetic that overflows (A-E, UBSan)
// or as allocation sizes (F, G). Until they are fixed, calls that would hit
// them are skipped unless fuzz::CheckKnownBugs() (F: see DoInit).
//   A. ChunkAssembler::Add: chunk.offset() + n, offset near INT64_MAX.
//   B. ApplyPush (SSP, ASYNC): version_before - based_on_version, a very
//      negative based_on_version.
//   C. CheckChunksLocked, MarkChunksLocked (SSP, ASYNC): first_chunk +
//      weight, first_chunk near INT64_MAX.
//   D. ApplyPush: clock + 1, clock INT64_MAX.
//   E. PullReadyLocked (SSP): (clock - staleness) * total_replicas, a
//      pull clock above INT64_MAX / total_replicas.
//   F. CheckInit accepts partitions of any count, and the service then
//      has ChunkAssembler allocate every element before a chunk arrives:
//      a 40-byte header asking for 2^40 elements aborts the shard
//      (std::bad_alloc) or gets it OOM-killed. The check below holds it to
//      PlanPartitions' own limit, kMaxParamElements.
//   G. CheckInit accepts any world_size >= 1, and Init sizes a per-rank
//      vector by it: world_size 2^31 - 1 allocates 16 GiB (bad_alloc).
//      The cluster spec allows 4096 workers at most.
constexpr int64_t kKnownBugBound = int64_t{1} << 62;
constexpr int64_t kKnownBugPullClock = int64_t{1} << 31;
constexpr int32_t kMaxWorkers = 4096;

bool HitsKnownBug(const fuzz::ShardFuzzCall& call) {
  for (const InitRequest& r : call.init()) {
    if (r.chunk().offset() > kKnownBugBound) return true;    // A
    if (r.header().world_size() > kMaxWorkers) return true;  // G
  }
  for (const PushRequest& r : call.push()) {
    if (r.chunk().offset() > kKnownBugBound) return true;  // A
    const PushHeader& h = r.header();
    if (h.based_on_version() < -kKnownBugBound) return true;  // B
    if (h.first_chunk() > kKnownBugBound) return true;        // C
    if (h.clock() > kKnownBugBound) return true;              // D
  }
  if (call.pull().clock() > kKnownBugPullClock) return true;       // E
  if (call.pull_rows().clock() > kKnownBugPullClock) return true;  // E
  return false;
}

absl::Status DoCall(ShardState& state, const fuzz::ShardFuzzCall& call,
                    Seen& seen) {
  if (!call.init().empty()) return DoInit(state, call.init(), seen);
  if (!call.push().empty()) return CheckedPush(state, call.push(), seen);
  if (call.has_pull()) return DoPull(state, call.pull(), seen);
  if (call.has_pull_rows()) return DoPullRows(state, call.pull_rows(), seen);
  if (call.stats()) {
    const ShardStats stats = state.TakeStats();
    FUZZ_CHECK(stats.staleness_histogram_size() == kStalenessBuckets,
               "staleness histogram size");
    FUZZ_CHECK(stats.version() >= seen.version, "version went back in stats");
  }
  return absl::OkStatus();
}

void Run(const fuzz::ShardFuzzCase& c) {
  const JobSpec job = MakeJob(c);
  ShardState state(job, Mod(c.shard_index(), job.ps().shards()));
  Seen seen;
  seen.consistency = job.ps().consistency();
  seen.tables_accept = TablesAccept(job.optimizer());
  for (const fuzz::ShardFuzzCall& call : c.calls()) {
    if (!fuzz::CheckKnownBugs() && HitsKnownBug(call)) continue;
    const absl::Status s = DoCall(state, call, seen);
    FUZZ_CHECK(Expected(s), fuzz::Describe("unexpected status", s));
    seen.rows.CheckHeld(state, seen.consistency);
  }
  state.Shutdown();
  const absl::StatusOr<ShardState::Snapshot> after =
      state.WaitForPull(0, 0, absl::InfinitePast());
  FUZZ_CHECK(after.status().code() == absl::StatusCode::kUnavailable,
             fuzz::Describe("pull after Shutdown", after.status()));
  const absl::StatusOr<ShardState::RowsSnapshot> rows_after =
      state.PullRows(PullRowsRequest(), absl::InfinitePast());
  FUZZ_CHECK(rows_after.status().code() == absl::StatusCode::kUnavailable,
             fuzz::Describe("PullRows after Shutdown", rows_after.status()));
}

}  // namespace
}  // namespace cohort

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  cohort::fuzz::SilenceProtobufLogs();
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size,
                                          size_t max_size, unsigned seed) {
  return cohort::fuzz::MutateProtoInput(
      cohort::fuzz::ShardFuzzCase::default_instance(), data, size, max_size,
      seed);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cohort::fuzz::ShardFuzzCase c;
  if (!c.ParseFromArray(data, static_cast<int>(size))) return 0;
  cohort::Run(c);
  return 0;
}

// The coordinator's durable state: what Persist writes after each change
// and what Restore reads back when a coordinator restarts.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "server/job_tracker.h"
#include "server/job_tracker_internal.h"

namespace cohort {
namespace {

using job_tracker_internal::Clock;
using job_tracker_internal::HeartbeatBound;
using job_tracker_internal::Millis;

// The state file `path` holds (`bytes`), refused unless it is `job`'s.
absl::StatusOr<CoordinatorState> ParseState(const std::string& path,
                                            const std::string& bytes,
                                            const JobSpec& job) {
  CoordinatorState st;
  // An empty string parses as an empty message, which would read as the
  // state of a job without a name; the coordinator never writes one (it
  // writes a whole new file and renames it).
  if (bytes.empty()) {
    return absl::DataLossError(absl::StrCat(
        path,
        " is empty: not a coordinator state file; remove it or use "
        "another --state-dir"));
  }
  if (!st.ParseFromString(bytes) || !st.has_job()) {
    return absl::DataLossError(absl::StrCat(
        path, ": not a coordinator state file (corrupt or truncated)"));
  }
  if (st.job().SerializeAsString() != job.SerializeAsString()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " holds the state of another job (\"",
                     st.job().name(), "\"); use another --state-dir"));
  }
  return st;
}

}  // namespace

void JobTracker::Persist() {
  if (state_path_.empty()) return;
  CoordinatorState st;
  *st.mutable_job() = job_;
  st.set_state(state_);
  st.set_reason(reason_);
  st.set_generation(generation_);
  st.set_epoch(epoch_);
  for (const Member& m : members_) {
    CoordinatorState::Member* out = st.add_members();
    *out->mutable_request() = m.request;
    out->set_rank(m.rank);
    out->set_replica_offset(m.replica_offset);
    out->set_finished(m.finished);
    if (m.result) {
      *out->mutable_result() = *m.result;
    }
  }
  st.set_restarts(restarts_);
  for (const GenerationRecord& r : generations_) *st.add_generations() = r;
  absl::Status s = WriteFileAtomically(state_path_, st.SerializeAsString());
  if (!s.ok()) {
    LOG(ERROR) << "cannot save the coordinator's state to " << state_path_
               << ": " << s.message()
               << " (a restarted coordinator would not find this job)";
  }
}

absl::Status JobTracker::Restore() {
  if (state_path_.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> bytes = ReadFile(state_path_);
  if (absl::IsNotFound(bytes.status())) return absl::OkStatus();  // fresh
  if (!bytes.ok()) return bytes.status();
  ASSIGN_OR_RETURN(const CoordinatorState st,
                   ParseState(state_path_, *bytes, job_));
  absl::MutexLock lock(&mu_);
  if (st.state() == FORMING) return absl::OkStatus();  // joins start over
  state_ = st.state();
  reason_ = st.reason();
  generation_ = st.generation();
  epoch_ = st.epoch();
  restarts_ = st.restarts();
  generations_.assign(st.generations().begin(), st.generations().end());
  const Clock::time_point now = Clock::now();
  RETURN_IF_ERROR(RestoreMembers(st, now));
  if (IsTerminal(state_)) ended_ = now;
  if (generation_ > 0) kv_.StartGeneration(generation_);
  LOG(INFO) << "resumed job " << job_.name() << " from " << state_path_ << ": "
            << JobState_Name(state_) << ", generation " << generation_
            << ", epoch " << epoch_ << ", " << members_.size() << " workers";
  return absl::OkStatus();
}

absl::Status JobTracker::RestoreMembers(const CoordinatorState& st,
                                        Clock::time_point now) {
  const ClusterSpec& c = job_.cluster();
  const Clock::duration grace = Millis(c.coordinator_grace_ms());
  const Clock::duration bound = HeartbeatBound(c);
  members_.assign(st.members_size(), Member());
  rank_of_.clear();
  for (const CoordinatorState::Member& in : st.members()) {
    if (in.rank() < 0 || in.rank() >= st.members_size()) {
      return absl::DataLossError(absl::StrCat(state_path_, ": member rank ",
                                              in.rank(), " outside [0, ",
                                              st.members_size(), ")"));
    }
    Member& m = members_[in.rank()];
    m.request = in.request();
    m.rank = in.rank();
    m.replica_offset = in.replica_offset();
    m.finished = in.finished();
    m.knows_end = in.finished();
    if (in.has_result()) m.result = in.result();
    // Workers reconnect with backoff after the outage: each member has
    // coordinator_grace_ms from now to come back (as they waited as long
    // for this coordinator), not just the heartbeat bound.
    m.last_seen = now + std::max(Clock::duration::zero(), grace - bound);
    rank_of_[m.request.worker_id()] = m.rank;
    previous_ranks_[m.request.worker_id()] = m.rank;
  }
  return absl::OkStatus();
}

}  // namespace cohort

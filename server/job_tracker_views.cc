// Read-only views of the job: status, metrics and the final report.
#include <algorithm>

#include "server/job_tracker.h"
#include "server/job_tracker_internal.h"
#include "server/report.h"

namespace cohort {
namespace {

using job_tracker_internal::Seconds;

}  // namespace

WorkerStatus JobTracker::Describe(const Member& m,
                                  Clock::time_point now) const {
  WorkerStatus w;
  w.set_worker_id(m.request.worker_id());
  w.set_host(m.request.host());
  w.set_address(m.request.address());
  w.set_pid(m.request.pid());
  w.set_rank(m.rank);
  w.set_replicas(m.request.replicas());
  // A restored coordinator dates heartbeats ahead (its grace period).
  w.set_heartbeat_age_s(std::max(0.0, Seconds(now - m.last_seen)));
  *w.mutable_progress() = m.progress;
  w.set_finished(m.finished);
  w.set_step_busy_s(m.busy_s);
  w.set_busy_vs_median(m.busy_vs_median);
  w.set_straggler(m.straggler);
  return w;
}

// The members of the current generation (during a regroup, of the one that
// is over) or, while the first round forms, the workers waiting in Join
// (rank -1; the age counts from their join).
std::vector<WorkerStatus> JobTracker::Workers() const {
  const Clock::time_point now = Clock::now();
  std::vector<WorkerStatus> out;
  for (const Member& m : members_) out.push_back(Describe(m, now));
  if (!members_.empty()) return out;
  for (const Joiner& j : joiners_) {
    Member waiting;
    waiting.request = j.request;
    waiting.rank = -1;
    waiting.last_seen = j.joined;
    out.push_back(Describe(waiting, now));
  }
  return out;
}

ShardStatus JobTracker::DescribeShard(int index, Clock::time_point now) const {
  const Shard& shard = shards_[index];
  ShardStatus s;
  s.set_index(index);
  s.set_shard_id(shard.request.shard_id());
  s.set_address(shard.request.address());
  s.set_host(shard.request.host());
  s.set_pid(shard.request.pid());
  s.set_heartbeat_age_s(Seconds(now - shard.last_seen));
  *s.mutable_stats() = shard.stats;
  s.set_restarts(shard.restarts);
  s.set_state(shard.dead ? "dead" : shard.restoring ? "restoring" : "serving");
  for (const Partition& p : plan_) {
    if (p.shard() != index) continue;
    s.set_partitions(s.partitions() + 1);
    s.set_parameters(s.parameters() + p.count());
  }
  return s;
}

StatusResponse JobTracker::Status() const {
  absl::MutexLock lock(&mu_);
  StatusResponse s;
  s.set_job_name(job_.name());
  s.set_state(state_);
  s.set_reason(reason_);
  s.set_generation(generation_);
  s.set_epoch(epoch_);
  int64_t step = 0;
  for (const Member& m : members_) step = std::max(step, m.progress.step());
  s.set_step(step);
  s.set_world_size(members_.size());
  for (WorkerStatus& w : Workers()) *s.add_workers() = std::move(w);
  s.set_uptime_s(Seconds(Clock::now() - started_));
  const Clock::time_point now = Clock::now();
  for (size_t i = 0; i < shards_.size(); ++i) {
    *s.add_shards() = DescribeShard(i, now);
  }
  for (const Partition& p : plan_) *s.add_partitions() = p;
  for (const std::string& line : Stragglers()) s.add_stragglers(line);
  s.set_restarts(restarts_);
  s.set_regrouping(regroup_.has_value());
  if (regroup_) s.set_regroup_reason(regroup_->Cause());
  for (const GenerationRecord& r : generations_) *s.add_generations() = r;
  s.set_refused_workers(refused_workers_);
  s.set_last_refusal(last_refusal_);
  return s;
}

MetricsResponse JobTracker::Metrics() const {
  absl::MutexLock lock(&mu_);
  MetricsResponse m;
  double samples_per_s = 0;
  for (WorkerStatus& w : Workers()) {
    samples_per_s += w.progress().samples_per_s();
    *m.add_workers() = std::move(w);
  }
  m.set_samples_per_s(samples_per_s);
  for (const std::string& line : Stragglers()) m.add_stragglers(line);
  const Clock::time_point now = Clock::now();
  for (size_t i = 0; i < shards_.size(); ++i) {
    *m.add_shards() = DescribeShard(i, now);
  }
  m.set_restarts(restarts_);
  m.set_generation(generation_);
  return m;
}

std::string JobTracker::ReportJson() const {
  absl::MutexLock lock(&mu_);
  JobReport r;
  r.job_name = job_.name();
  r.model = job_.model().zoo();
  r.state = state_;
  r.reason = reason_;
  r.world_size = members_.size();
  for (const Member& m : members_) {
    r.total_replicas += m.request.replicas();
    r.results.push_back(m.result);
  }
  return JobReportJson(r);
}

}  // namespace cohort

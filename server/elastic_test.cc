// Elastic recovery in the coordinator's JobTracker, called directly from
// real threads (one per simulated worker, heartbeating on a short interval):
// a worker that goes silent or leaves its generation opens a regroup, the
// survivors rejoin as the next generation, replacements and growth, the
// restarts budget, the join timeout, fencing of the old generation, the KV
// abort, generation records, and Persist/Restore. PS jobs keep failing.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/spec.h"
#include "gtest/gtest.h"
#include "server/job_tracker.h"
#include "server/request_checks.h"

namespace cohort {
namespace {

using Clock = std::chrono::steady_clock;

// A worker is dead after kMisses * kBeatMs without a heartbeat; simulated
// workers beat every kBeatMs / 2. The bound (0.6 s) outlasts the stalls a
// loaded machine gives this process's threads, or every simulated worker
// would seem to die at once.
constexpr int kBeatMs = 200;
constexpr int kMisses = 3;
constexpr double kBoundS = kBeatMs * kMisses / 1000.0;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double Between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Polls `done` until it holds or `seconds` pass.
bool WaitFor(const std::function<bool()>& done, double seconds = 5) {
  const Clock::time_point start = Clock::now();
  while (!done()) {
    if (SecondsSince(start) > seconds) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

JobSpec Spec(int min_workers, int max_workers, int max_restarts,
             int join_timeout_ms = 5000) {
  JobSpec job;
  job.set_name("elastic");
  job.set_seed(7);
  ClusterSpec* c = job.mutable_cluster();
  c->set_min_workers(min_workers);
  c->set_max_workers(max_workers);
  c->set_last_call_ms(50);
  c->set_join_timeout_ms(join_timeout_ms);
  c->set_heartbeat_interval_ms(kBeatMs);
  c->set_heartbeat_misses(kMisses);
  c->set_max_restarts(max_restarts);
  FillClusterDefaults(c);
  return job;
}

// Worker `id` ("w<digit>"): host "host-<id>", pid 1000 + the digit.
JoinRequest Request(const std::string& id, uint64_t leaving_generation = 0) {
  JoinRequest r;
  r.set_protocol_version(Protocol::CURRENT);
  r.set_worker_id(id);
  r.set_host("host-" + id);
  r.set_pid(1000 + (id.back() - '0'));
  r.set_replicas(1);
  r.set_address("127.0.0.1");
  r.set_leaving_generation(leaving_generation);
  return r;
}

// A Join blocked in its own thread; Get() waits for its answer.
class PendingJoin {
 public:
  PendingJoin(JobTracker& t, JoinRequest r)
      : thread_([this, &t, r] {
          absl::StatusOr<JoinResponse> got = t.Join(r, nullptr);
          absl::MutexLock lock(&mu_);
          result_ = std::move(got);
          done_at_ = Clock::now();
        }) {}
  ~PendingJoin() {
    if (thread_.joinable()) thread_.join();
  }
  absl::StatusOr<JoinResponse> Get() {
    if (thread_.joinable()) thread_.join();
    absl::MutexLock lock(&mu_);
    return result_;
  }
  Clock::time_point done_at() {
    if (thread_.joinable()) thread_.join();
    absl::MutexLock lock(&mu_);
    return done_at_;
  }

 private:
  absl::Mutex mu_;
  absl::StatusOr<JoinResponse> result_ ABSL_GUARDED_BY(mu_) =
      absl::UnknownError("no answer yet");
  Clock::time_point done_at_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts once the fields above exist
};

// A member's heartbeat loop, as a worker's: it reports `step` (rising by
// one a beat when `rising`) and `restored_step`, and stops beating when told
// to (a killed worker), or when answered with regroup (the worker then
// rejoins) or stop, or refused.
class Beater {
 public:
  Beater(JobTracker& t, const JoinResponse& joined, std::string id,
         int64_t step = 1, int64_t restored_step = 0, bool rising = true)
      : t_(t),
        joined_(joined),
        id_(std::move(id)),
        restored_step_(restored_step),
        rising_(rising),
        step_(step) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Beater() { Stop(); }
  // Stops beating, like a killed worker; returns its last heartbeat time.
  Clock::time_point Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    absl::MutexLock lock(&mu_);
    return last_beat_;
  }
  void set_step(int64_t step) { step_ = step; }
  bool regroup() const { return regroup_; }
  bool told_to_stop() const { return told_to_stop_; }
  int64_t last_step() {
    absl::MutexLock lock(&mu_);
    return last_step_;
  }
  Clock::time_point regroup_at() {
    absl::MutexLock lock(&mu_);
    return regroup_at_;
  }

 private:
  void Loop() {
    while (!stop_) {
      HeartbeatRequest r;
      r.set_generation(joined_.generation());
      r.set_worker_id(id_);
      r.set_rank(joined_.rank());
      const int64_t step = rising_ ? step_++ : step_.load();
      r.mutable_progress()->set_step(step);
      r.mutable_progress()->set_restored_step(restored_step_);
      absl::StatusOr<HeartbeatResponse> got = t_.Heartbeat(r);
      {
        absl::MutexLock lock(&mu_);
        last_beat_ = Clock::now();
        last_step_ = step;
        if (got.ok() && got->regroup()) regroup_at_ = last_beat_;
      }
      if (!got.ok()) return;
      if (got->regroup()) {
        regroup_ = true;
        return;
      }
      if (got->stop()) {
        told_to_stop_ = true;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(kBeatMs / 2));
    }
  }

  JobTracker& t_;
  const JoinResponse joined_;
  const std::string id_;
  const int64_t restored_step_;
  const bool rising_;
  std::atomic<int64_t> step_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> regroup_{false};
  std::atomic<bool> told_to_stop_{false};
  absl::Mutex mu_;
  Clock::time_point last_beat_ ABSL_GUARDED_BY(mu_);
  Clock::time_point regroup_at_ ABSL_GUARDED_BY(mu_);
  int64_t last_step_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

// Forms the first generation from "w0".."w<n-1>", joined in that order so
// that worker i gets rank i.
std::vector<JoinResponse> FormFirst(JobTracker& t, int n) {
  std::vector<std::unique_ptr<PendingJoin>> joins;
  for (int i = 0; i < n; ++i) {
    joins.push_back(
        std::make_unique<PendingJoin>(t, Request("w" + std::to_string(i))));
    EXPECT_TRUE(WaitFor([&] { return t.Status().workers_size() > i; }));
  }
  std::vector<JoinResponse> out;
  for (auto& j : joins) {
    absl::StatusOr<JoinResponse> r = j->Get();
    EXPECT_TRUE(r.ok()) << r.status();
    out.push_back(r.ok() ? *r : JoinResponse());
    EXPECT_EQ(out.back().rank(), static_cast<int>(out.size()) - 1);
    EXPECT_EQ(out.back().generation(), 1u);
  }
  return out;
}

// One heartbeat of a member with the given progress.
absl::StatusOr<HeartbeatResponse> Beat(JobTracker& t, const JoinResponse& j,
                                       const std::string& id, int64_t step,
                                       int64_t restored_step = 0) {
  HeartbeatRequest r;
  r.set_generation(j.generation());
  r.set_worker_id(id);
  r.set_rank(j.rank());
  r.mutable_progress()->set_step(step);
  r.mutable_progress()->set_restored_step(restored_step);
  return t.Heartbeat(r);
}

// Three workers (min 2, max 3); w2 is killed; w0 and w1 rejoin as
// generation 2 and heartbeat there, restored from step 40 and holding it
// (set_step moves them on). What the tests look at afterwards.
struct AfterKill {
  std::vector<JoinResponse> first;
  JoinResponse r0, r1;  // generation 2
  std::unique_ptr<Beater> b0, b1;
  double detected_s = 0;  // from w2's last heartbeat to w0's regroup answer
  int64_t newest_step = 0;
  StatusResponse during;  // status while regrouping
};

AfterKill KillOneOfThree(JobTracker& t) {
  AfterKill out;
  out.first = FormFirst(t, 3);
  Beater b0(t, out.first[0], "w0", 1);
  Beater b1(t, out.first[1], "w1", 1);
  Beater b2(t, out.first[2], "w2", 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const Clock::time_point killed = b2.Stop();
  EXPECT_TRUE(WaitFor([&] { return b0.regroup() && b1.regroup(); }))
      << "the survivors were never told to regroup";
  out.detected_s = Between(killed, b0.regroup_at());
  out.newest_step = std::max({b0.last_step(), b1.last_step(), b2.last_step()});
  out.during = t.Status();
  PendingJoin j0(t, Request("w0", 1));
  PendingJoin j1(t, Request("w1", 1));
  absl::StatusOr<JoinResponse> r0 = j0.Get();
  absl::StatusOr<JoinResponse> r1 = j1.Get();
  EXPECT_TRUE(r0.ok()) << r0.status();
  EXPECT_TRUE(r1.ok()) << r1.status();
  if (r0.ok()) out.r0 = *r0;
  if (r1.ok()) out.r1 = *r1;
  out.b0 = std::make_unique<Beater>(t, out.r0, "w0", 40, 40, false);
  out.b1 = std::make_unique<Beater>(t, out.r1, "w1", 40, 40, false);
  return out;
}

TEST(Elastic, KilledWorkerRegroupsTheSurvivorsAsTheNextGeneration) {
  JobTracker t(Spec(2, 3, 3));
  const AfterKill k = KillOneOfThree(t);
  // Detected within the bound (a tick and a beat of slack), not before.
  EXPECT_GE(k.detected_s, kBoundS);
  EXPECT_LT(k.detected_s, kBoundS + 1.0);
  EXPECT_EQ(k.during.state(), RUNNING);
  EXPECT_TRUE(k.during.regrouping());
  EXPECT_EQ(k.during.restarts(), 1);
  EXPECT_EQ(k.during.generation(), 1u);
  EXPECT_TRUE(Contains(k.during.regroup_reason(),
                       "failure: worker rank 2 (host host-w2, pid 1002) "
                       "missed heartbeats for "))
      << k.during.regroup_reason();

  for (const JoinResponse* r : {&k.r0, &k.r1}) {
    EXPECT_EQ(r->generation(), 2u);
    EXPECT_EQ(r->world_size(), 2);
    EXPECT_EQ(r->total_replicas(), 2);
    EXPECT_EQ(r->restarts(), 1);
    EXPECT_EQ(r->kv_prefix(), "g2/");
  }
  EXPECT_EQ(k.r0.rank(), 0);
  EXPECT_EQ(k.r1.rank(), 1);
  EXPECT_EQ(k.r1.replica_offset(), 1);

  const StatusResponse s = t.Status();
  EXPECT_EQ(s.state(), RUNNING);
  EXPECT_FALSE(s.regrouping());
  EXPECT_EQ(s.regroup_reason(), "");
  EXPECT_EQ(s.generation(), 2u);
  EXPECT_EQ(s.world_size(), 2);
  EXPECT_EQ(s.restarts(), 1);
  ASSERT_EQ(s.generations_size(), 2);
  const GenerationRecord& start = s.generations(0);
  EXPECT_EQ(start.generation(), 1u);
  EXPECT_EQ(start.world_size(), 3);
  EXPECT_EQ(start.cause(), "start");
  EXPECT_FALSE(start.after_failure());
  const GenerationRecord& g2 = s.generations(1);
  EXPECT_EQ(g2.generation(), 2u);
  EXPECT_EQ(g2.world_size(), 2);
  EXPECT_TRUE(g2.after_failure());
  EXPECT_TRUE(Contains(g2.cause(), "failure: worker rank 2")) << g2.cause();
  EXPECT_GE(g2.silent_s(), kBoundS);
  EXPECT_LT(g2.silent_s(), kBoundS + 1.0);
  EXPECT_GT(g2.regroup_started_unix_s(), 1.6e9);
  EXPECT_GE(g2.formed_unix_s(), g2.regroup_started_unix_s());
  EXPECT_EQ(g2.previous_step(), k.newest_step);

  const MetricsResponse m = t.Metrics();
  EXPECT_EQ(m.restarts(), 1);
  EXPECT_EQ(m.generation(), 2u);

  // The new generation reports where it restored from, then trains on.
  ASSERT_TRUE(
      WaitFor([&] { return t.Status().generations(1).restored_step() == 40; }));
  EXPECT_EQ(t.Status().generations(1).first_step_unix_s(), 0);
  k.b1->set_step(41);
  ASSERT_TRUE(WaitFor(
      [&] { return t.Status().generations(1).first_step_unix_s() > 0; }));
  const GenerationRecord now = t.Status().generations(1);
  EXPECT_GE(now.first_step_unix_s(), now.formed_unix_s());
  EXPECT_FALSE(k.b0->regroup() || k.b1->regroup());
  EXPECT_EQ(t.Status().restarts(), 1);
}

TEST(Elastic, TheOldGenerationIsFenced) {
  JobTracker t(Spec(2, 3, 3));
  const AfterKill k = KillOneOfThree(t);
  const JoinResponse& dead = k.first[2];
  absl::StatusOr<HeartbeatResponse> beat = Beat(t, dead, "w2", 99);
  EXPECT_EQ(beat.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(beat.status().message(),
            "generation 1 is over (the job is at generation 2); this worker "
            "was dropped from the job");
  BeginEpochRequest epoch;
  epoch.set_generation(1);
  epoch.set_rank(2);
  epoch.set_epoch(1);
  absl::StatusOr<uint64_t> seed = t.BeginEpoch(epoch);
  EXPECT_EQ(seed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(
      Contains(std::string(seed.status().message()), "generation 1 is over"))
      << seed.status();
  FinishRequest finish;
  finish.set_generation(1);
  finish.set_worker_id("w2");
  finish.set_rank(2);
  finish.set_ok(true);
  EXPECT_EQ(t.Finish(finish).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(t.kv().Set(1, "k", "v").code(),
            absl::StatusCode::kFailedPrecondition);
  // A survivor's Join retried with its old leaving_generation gets its
  // generation-2 place again; none of this disturbed the job.
  absl::StatusOr<JoinResponse> again = t.Join(Request("w1", 1), nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->generation(), 2u);
  EXPECT_EQ(again->rank(), 1);
  const StatusResponse s = t.Status();
  EXPECT_EQ(s.state(), RUNNING);
  EXPECT_FALSE(s.regrouping());
  EXPECT_EQ(s.restarts(), 1);
}

TEST(Elastic, RejoinStartsTheRegroupAndTheDeadOneCompletesIt) {
  JobTracker t(Spec(2, 3, 3));
  const std::vector<JoinResponse> first = FormFirst(t, 3);
  Beater b0(t, first[0], "w0");
  Beater b1(t, first[1], "w1");
  Beater b2(t, first[2], "w2");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // w0's collectives fail (w2 vanished); w2 is not yet declared dead.
  b0.Stop();
  const Clock::time_point killed = b2.Stop();
  PendingJoin j0(t, Request("w0", 1));
  ASSERT_TRUE(WaitFor([&] { return t.Status().regrouping(); }));
  const StatusResponse during = t.Status();
  EXPECT_EQ(during.restarts(), 1);
  EXPECT_TRUE(Contains(during.regroup_reason(),
                       "failure: worker rank 0 (host host-w0, pid 1000) left "
                       "generation 1"))
      << during.regroup_reason();
  ASSERT_TRUE(WaitFor([&] { return b1.regroup(); }));
  PendingJoin j1(t, Request("w1", 1));
  absl::StatusOr<JoinResponse> r0 = j0.Get();
  absl::StatusOr<JoinResponse> r1 = j1.Get();
  ASSERT_TRUE(r0.ok()) << r0.status();
  ASSERT_TRUE(r1.ok()) << r1.status();
  // The round waited for w2 to be declared dead.
  EXPECT_GE(Between(killed, j0.done_at()), kBoundS);
  EXPECT_EQ(r0->generation(), 2u);
  EXPECT_EQ(r0->world_size(), 2);
  EXPECT_EQ(r0->rank(), 0);
  EXPECT_EQ(r1->rank(), 1);
  EXPECT_EQ(r0->restarts(), 1);
  Beater c0(t, *r0, "w0");
  Beater c1(t, *r1, "w1");
  const StatusResponse s = t.Status();
  EXPECT_EQ(s.restarts(), 1) << "two failures of one regroup count once";
  ASSERT_EQ(s.generations_size(), 2);
  EXPECT_TRUE(s.generations(1).after_failure());
  // Once w2 was declared dead, the cause names it instead of w0.
  EXPECT_TRUE(Contains(s.generations(1).cause(),
                       "failure: worker rank 2 (host host-w2, pid 1002) missed "
                       "heartbeats"))
      << s.generations(1).cause();
  EXPECT_TRUE(Contains(s.generations(1).cause(),
                       "(its peers' collectives failed first)"));
  EXPECT_GE(s.generations(1).silent_s(), kBoundS);
}

TEST(Elastic, PastTheBudgetTheFailureNamesTheDeadPeerNotTheReporter) {
  JobTracker t(Spec(1, 3, 1));
  const std::vector<JoinResponse> first = FormFirst(t, 3);
  Beater b0(t, first[0], "w0"), b1(t, first[1], "w1"), b2(t, first[2], "w2");
  b2.Stop();  // the first failure uses the only restart
  ASSERT_TRUE(WaitFor([&] { return b0.regroup() && b1.regroup(); }));
  PendingJoin j0(t, Request("w0", 1)), j1(t, Request("w1", 1));
  absl::StatusOr<JoinResponse> r0 = j0.Get(), r1 = j1.Get();
  ASSERT_TRUE(r0.ok() && r1.ok()) << r0.status() << r1.status();
  Beater c0(t, *r0, "w0"), c1(t, *r1, "w1");
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  // w1 dies; w0's collective fails at once and it reports first.
  c1.Stop();
  c0.Stop();
  absl::StatusOr<JoinResponse> third = t.Join(Request("w0", 2), nullptr);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kAborted);
  const StatusResponse s = t.Status();
  EXPECT_EQ(s.state(), FAILED);
  EXPECT_TRUE(Contains(s.reason(),
                       "worker rank 1 (host host-w1, pid 1001) missed "
                       "heartbeats"))
      << s.reason();
  EXPECT_TRUE(
      Contains(s.reason(), "; no restarts left (cluster.max_restarts = 1)"))
      << s.reason();
  EXPECT_EQ(s.restarts(), 1);
}

TEST(Elastic, ReplacementStartedBeforeTheDeathIsNoticedWaitsForRoom) {
  JobTracker t(Spec(2, 3, 3));
  const std::vector<JoinResponse> first = FormFirst(t, 3);
  Beater b0(t, first[0], "w0"), b1(t, first[1], "w1"), b2(t, first[2], "w2");
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  b2.Stop();
  // The job still looks full: the replacement's join waits instead of
  // being refused, and joins the round the death opens.
  PendingJoin j3(t, Request("w3"));
  ASSERT_TRUE(WaitFor([&] { return b0.regroup() && b1.regroup(); }));
  PendingJoin j0(t, Request("w0", 1)), j1(t, Request("w1", 1));
  absl::StatusOr<JoinResponse> r3 = j3.Get();
  ASSERT_TRUE(r3.ok()) << r3.status();
  EXPECT_EQ(r3->generation(), 2u);
  EXPECT_EQ(r3->world_size(), 3);
  EXPECT_EQ(r3->restarts(), 1);
  ASSERT_TRUE(j0.Get().ok());
  ASSERT_TRUE(j1.Get().ok());
  const StatusResponse s = t.Status();
  ASSERT_EQ(s.generations_size(), 2);
  EXPECT_TRUE(s.generations(1).after_failure());
  EXPECT_TRUE(Contains(s.generations(1).cause(), "worker rank 2"))
      << s.generations(1).cause();
}

TEST(Elastic, NewWorkerGrowsARunningJobWithoutUsingARestart) {
  JobTracker t(Spec(2, 3, 3));
  const std::vector<JoinResponse> first = FormFirst(t, 2);
  ASSERT_EQ(first[0].world_size(), 2);
  Beater b0(t, first[0], "w0");
  Beater b1(t, first[1], "w1");
  PendingJoin j2(t, Request("w2"));
  ASSERT_TRUE(WaitFor([&] { return b0.regroup() && b1.regroup(); }));
  const StatusResponse during = t.Status();
  EXPECT_TRUE(during.regrouping());
  EXPECT_EQ(during.regroup_reason(), "growth: worker host-w2:1002 joined");
  EXPECT_EQ(during.restarts(), 0);
  PendingJoin j0(t, Request("w0", 1));
  PendingJoin j1(t, Request("w1", 1));
  std::vector<JoinResponse> second;
  for (PendingJoin* j : {&j0, &j1, &j2}) {
    absl::StatusOr<JoinResponse> r = j->Get();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->generation(), 2u);
    EXPECT_EQ(r->world_size(), 3);
    EXPECT_EQ(r->restarts(), 0);
    second.push_back(*r);
  }
  EXPECT_EQ(second[0].rank(), 0);
  EXPECT_EQ(second[1].rank(), 1);
  EXPECT_EQ(second[2].rank(), 2);
  const StatusResponse s = t.Status();
  EXPECT_EQ(s.restarts(), 0);
  ASSERT_EQ(s.generations_size(), 2);
  EXPECT_FALSE(s.generations(1).after_failure());
  EXPECT_EQ(s.generations(1).cause(), "growth: worker host-w2:1002 joined");
  EXPECT_EQ(s.generations(1).world_size(), 3);
}

TEST(Elastic, GrowthNeedsRoomAndARestartsBudget) {
  JobTracker full(Spec(1, 1, 3));
  const std::vector<JoinResponse> only = FormFirst(full, 1);
  Beater alive(full, only[0], "w0");
  // Refused once the heartbeat bound has shown that nobody died.
  const Clock::time_point asked = Clock::now();
  absl::StatusOr<JoinResponse> extra = full.Join(Request("w1"), nullptr);
  EXPECT_EQ(extra.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_GE(SecondsSince(asked), kBoundS);
  EXPECT_FALSE(full.Status().regrouping());

  JobTracker fixed(Spec(1, 2, 0));
  FormFirst(fixed, 1);
  absl::StatusOr<JoinResponse> late = fixed.Join(Request("w1"), nullptr);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(std::string(late.status().message()),
                       "already running generation 1"))
      << late.status();
  EXPECT_TRUE(Contains(std::string(late.status().message()),
                       "cluster.max_restarts > 0"))
      << late.status();
  EXPECT_FALSE(fixed.Status().regrouping());
}

TEST(Elastic, FailurePastTheBudgetFailsTheJob) {
  JobTracker t(Spec(1, 2, 1));
  const std::vector<JoinResponse> first = FormFirst(t, 2);
  Beater b0(t, first[0], "w0");
  Beater b1(t, first[1], "w1");
  b1.Stop();
  ASSERT_TRUE(WaitFor([&] { return b0.regroup(); }));
  absl::StatusOr<JoinResponse> second = t.Join(Request("w0", 1), nullptr);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->generation(), 2u);
  EXPECT_EQ(second->world_size(), 1);
  EXPECT_EQ(second->restarts(), 1);
  // Generation 2's collectives fail too (just after a heartbeat, well
  // within the bound): the budget is spent.
  ASSERT_TRUE(Beat(t, *second, "w0", 3).ok());
  absl::StatusOr<JoinResponse> third = t.Join(Request("w0", 2), nullptr);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kAborted);
  const StatusResponse s = t.Status();
  EXPECT_EQ(s.state(), FAILED);
  EXPECT_EQ(s.reason(),
            "worker rank 0 (host host-w0, pid 1000) left generation 2 (its "
            "collectives failed: a peer died or stalled); no restarts left "
            "(cluster.max_restarts = "
            "1)");
  EXPECT_TRUE(Contains(std::string(third.status().message()), s.reason()))
      << third.status();
  EXPECT_EQ(s.restarts(), 1);
  EXPECT_FALSE(s.regrouping());
}

TEST(Elastic, NoRestartsFailsAtTheFirstDeathAsBefore) {
  JobTracker t(Spec(2, 2, 0));
  const std::vector<JoinResponse> first = FormFirst(t, 2);
  Beater b0(t, first[0], "w0");
  Beater b1(t, first[1], "w1");
  b1.Stop();
  ASSERT_TRUE(WaitFor([&] { return b0.told_to_stop(); }));
  EXPECT_FALSE(b0.regroup());
  const StatusResponse s = t.Status();
  EXPECT_EQ(s.state(), FAILED);
  EXPECT_TRUE(Contains(s.reason(),
                       "worker rank 1 (host host-w1, pid 1001) missed "
                       "heartbeats for "))
      << s.reason();
  EXPECT_TRUE(
      Contains(s.reason(), "; no restarts left (cluster.max_restarts = 0)"))
      << s.reason();
  EXPECT_EQ(s.restarts(), 0);
  EXPECT_EQ(s.generations_size(), 1);
}

TEST(Elastic, FinishNotOkStillFailsTheJob) {
  JobTracker t(Spec(2, 2, 3));
  const std::vector<JoinResponse> first = FormFirst(t, 2);
  FinishRequest f;
  f.set_generation(1);
  f.set_worker_id("w1");
  f.set_rank(1);
  f.set_ok(false);
  f.set_error("loss is NaN at step 12");
  ASSERT_TRUE(t.Finish(f).ok());
  const StatusResponse s = t.Status();
  EXPECT_EQ(s.state(), FAILED);
  EXPECT_EQ(s.reason(), "worker rank 1 (host host-w1): loss is NaN at step 12");
  EXPECT_EQ(s.restarts(), 0);
}

TEST(Elastic, BelowMinWorkersTheRoundWaitsForAReplacement) {
  JobTracker t(Spec(2, 2, 3));
  const std::vector<JoinResponse> first = FormFirst(t, 2);
  Beater b0(t, first[0], "w0");
  Beater b1(t, first[1], "w1");
  b1.Stop();
  ASSERT_TRUE(WaitFor([&] { return b0.regroup(); }));
  PendingJoin j0(t, Request("w0", 1));
  // Past the heartbeat bound, nobody else is awaited, and one is too few.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  StatusResponse s = t.Status();
  EXPECT_TRUE(s.regrouping());
  EXPECT_EQ(s.generation(), 1u);
  PendingJoin j2(t, Request("w2"));
  absl::StatusOr<JoinResponse> r0 = j0.Get();
  absl::StatusOr<JoinResponse> r2 = j2.Get();
  ASSERT_TRUE(r0.ok()) << r0.status();
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r0->generation(), 2u);
  EXPECT_EQ(r0->world_size(), 2);
  EXPECT_EQ(r0->rank(), 0);
  EXPECT_EQ(r2->rank(), 1);
  EXPECT_EQ(r2->restarts(), 1);
  s = t.Status();
  EXPECT_EQ(s.state(), RUNNING);
  EXPECT_FALSE(s.regrouping());
  EXPECT_EQ(s.workers(1).worker_id(), "w2");
}

TEST(Elastic, BelowMinWorkersFailsAfterTheJoinTimeout) {
  constexpr int kTimeoutMs = 600;
  JobTracker t(Spec(2, 2, 3, kTimeoutMs));
  const std::vector<JoinResponse> first = FormFirst(t, 2);
  Beater b0(t, first[0], "w0");
  Beater b1(t, first[1], "w1");
  b1.Stop();
  ASSERT_TRUE(WaitFor([&] { return b0.regroup(); }));
  const Clock::time_point noticed = b0.regroup_at();
  PendingJoin j0(t, Request("w0", 1));
  absl::StatusOr<JoinResponse> r0 = j0.Get();
  // The regroup began up to a beat before w0 heard of it.
  EXPECT_GE(Between(noticed, j0.done_at()), kTimeoutMs / 1000.0 - 0.1);
  EXPECT_LT(Between(noticed, j0.done_at()), kTimeoutMs / 1000.0 + 1.0);
  EXPECT_EQ(r0.status().code(), absl::StatusCode::kAborted);
  const StatusResponse s = t.Status();
  EXPECT_EQ(s.state(), FAILED);
  EXPECT_TRUE(Contains(s.reason(),
                       "after worker rank 1 (host host-w1, pid 1001) missed "
                       "heartbeats for "))
      << s.reason();
  EXPECT_TRUE(Contains(s.reason(),
                       ": only 1 of cluster.min_workers = 2 workers rejoined "
                       "within cluster.join_timeout_ms (600 ms)"))
      << s.reason();
  EXPECT_TRUE(Contains(std::string(r0.status().message()), s.reason()));
}

TEST(Elastic, RequestsOfTheOverGenerationAreAborted) {
  JobTracker t(Spec(2, 2, 3));
  const std::vector<JoinResponse> first = FormFirst(t, 2);
  Beater b0(t, first[0], "w0");
  Beater b1(t, first[1], "w1");
  absl::Status waited;
  std::thread waiter(
      [&] { waited = t.kv().Wait(1, {"never"}, absl::Seconds(10), nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  b1.Stop();
  waiter.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kAborted) << waited;
  EXPECT_TRUE(Contains(std::string(waited.message()),
                       "generation 1 is over: the job is regrouping (failure: "
                       "worker rank 1 (host host-w1, pid 1001) missed "
                       "heartbeats"))
      << waited;
  ASSERT_TRUE(WaitFor([&] { return b0.regroup(); }));
  EXPECT_EQ(t.kv().Set(1, "k", "v").code(), absl::StatusCode::kAborted);
  BeginEpochRequest epoch;
  epoch.set_generation(1);
  epoch.set_rank(0);
  epoch.set_epoch(2);
  absl::StatusOr<uint64_t> seed = t.BeginEpoch(epoch);
  EXPECT_EQ(seed.status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(Contains(std::string(seed.status().message()),
                       "BeginEpoch refused: generation 1 is over"))
      << seed.status();
  FinishRequest finish;
  finish.set_generation(1);
  finish.set_worker_id("w0");
  finish.set_rank(0);
  finish.set_ok(true);
  EXPECT_EQ(t.Finish(finish).code(), absl::StatusCode::kAborted);
  // The heartbeat of a member the round still awaits says regroup, not
  // stop, and keeps it alive.
  absl::StatusOr<HeartbeatResponse> beat = Beat(t, first[0], "w0", 5);
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_TRUE(beat->regroup());
  EXPECT_FALSE(beat->stop());
  EXPECT_EQ(beat->state(), RUNNING);
  const StatusResponse s = t.Status();
  EXPECT_EQ(s.state(), RUNNING);
  EXPECT_EQ(s.epoch(), 0);
  EXPECT_FALSE(s.workers(0).finished());
}

TEST(Elastic, FinishNotOkDuringARegroupFailsTheJobNamingTheCause) {
  // A worker that cannot rejoin (a GPU worker) reports its failure while
  // the job regroups: the job fails now, with the regroup's cause.
  JobTracker t(Spec(2, 3, 2));
  std::vector<JoinResponse> first = FormFirst(t, 3);
  Beater b0(t, first[0], "w0"), b1(t, first[1], "w1");
  // w2 never beats: declared dead, the job regroups.
  ASSERT_TRUE(WaitFor([&] { return b0.regroup(); }));
  FinishRequest finish;
  finish.set_generation(1);
  finish.set_worker_id("w0");
  finish.set_rank(0);
  finish.set_ok(false);
  finish.set_error("NCCL: remote process exited");
  ASSERT_TRUE(t.Finish(finish).ok());
  const StatusResponse s = t.Status();
  EXPECT_EQ(s.state(), FAILED);
  EXPECT_TRUE(Contains(s.reason(),
                       "NCCL: remote process exited (while "
                       "regrouping after worker rank 2"))
      << s.reason();
}

TEST(Elastic, PersistAndRestoreKeepRestartsAndRecords) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(dir != nullptr ? dir : "/tmp") + "/elastic_test.state";
  std::remove(path.c_str());
  const JobSpec spec = Spec(2, 3, 3);
  JobTracker t(spec, path);
  ASSERT_TRUE(t.Restore().ok());
  const AfterKill k = KillOneOfThree(t);
  k.b0->set_step(41);
  ASSERT_TRUE(WaitFor(
      [&] { return t.Status().generations(1).first_step_unix_s() > 0; }));
  const StatusResponse before = t.Status();
  ASSERT_EQ(before.generations_size(), 2);
  ASSERT_EQ(before.generations(1).restored_step(), 40);

  JobTracker restored(spec, path);
  ASSERT_TRUE(restored.Restore().ok());
  const StatusResponse s = restored.Status();
  EXPECT_EQ(s.state(), RUNNING);
  EXPECT_EQ(s.generation(), 2u);
  EXPECT_EQ(s.world_size(), 2);
  EXPECT_EQ(s.restarts(), 1);
  ASSERT_EQ(s.generations_size(), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(s.generations(i).SerializeAsString(),
              before.generations(i).SerializeAsString())
        << "record " << i;
  }
  EXPECT_EQ(restored.Metrics().restarts(), 1);
}

TEST(Elastic, ParameterServerJobsStillFailWhenAWorkerDies) {
  JobSpec spec = Spec(2, 3, 3);
  spec.set_mode(PS);
  spec.mutable_ps()->set_shards(1);
  JobTracker t(spec);
  RegisterShardRequest shard;
  shard.set_protocol_version(Protocol::CURRENT);
  shard.set_shard_id("s0");
  shard.set_address("127.0.0.1:1");
  shard.set_host("host-s0");
  shard.set_pid(2000);
  ASSERT_TRUE(t.RegisterShard(shard).ok());
  std::atomic<bool> done{false};
  std::thread shard_beats([&] {
    while (!done) {
      ShardHeartbeatRequest r;
      r.set_shard_id("s0");
      r.set_shard_index(0);
      if (!t.ShardHeartbeat(r).ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(kBeatMs / 2));
    }
  });
  const std::vector<JoinResponse> first = FormFirst(t, 2);
  // A late worker is refused, and a "rejoin" gets the same place.
  absl::StatusOr<JoinResponse> late = t.Join(Request("w2"), nullptr);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<JoinResponse> again = t.Join(Request("w0", 1), nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->generation(), 1u);
  EXPECT_EQ(again->rank(), 0);
  {
    Beater b0(t, first[0], "w0");
    Beater b1(t, first[1], "w1");
    b1.Stop();
    EXPECT_TRUE(WaitFor([&] { return b0.told_to_stop(); }));
    EXPECT_FALSE(b0.regroup());
  }
  done = true;
  shard_beats.join();
  const StatusResponse s = t.Status();
  EXPECT_EQ(s.state(), FAILED);
  EXPECT_TRUE(Contains(s.reason(),
                       "worker rank 1 (host host-w1, pid 1001) "
                       "missed heartbeats for "))
      << s.reason();
  EXPECT_FALSE(Contains(s.reason(), "restarts")) << s.reason();
  EXPECT_EQ(s.restarts(), 0);
}

// A worker that leaves every generation it is in (its own
// fault, e.g. a disk it cannot write, which it mistook for a broken peer)
// while its peer stays healthy. Every generation after the first must be
// counted against cluster.max_restarts, and the job must fail once they
// are used up: never a generation past 1 + max_restarts, never SUCCEEDED.
TEST(Elastic, AWorkerThatLeavesEveryGenerationUsesUpTheRestarts) {
  constexpr int kRestarts = 3;
  JobTracker t(Spec(2, 2, kRestarts));
  std::vector<JoinResponse> current = FormFirst(t, 2);
  uint64_t highest = 1;
  for (int round = 0; round < 2 * kRestarts + 2; ++round) {
    if (t.Status().state() != RUNNING) break;
    Beater b1(t, current[1], "w1");
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    const uint64_t g = current[0].generation();
    PendingJoin j0(t, Request("w0", g));
    if (!WaitFor([&] { return b1.regroup() || b1.told_to_stop(); })) break;
    if (b1.told_to_stop()) break;
    PendingJoin j1(t, Request("w1", g));
    absl::StatusOr<JoinResponse> r0 = j0.Get(), r1 = j1.Get();
    if (!r0.ok() || !r1.ok()) break;
    highest = std::max<uint64_t>({highest, r0->generation(), r1->generation()});
    current = {*r0, *r1};
  }
  ASSERT_TRUE(WaitFor([&] { return t.Status().state() != RUNNING; }));
  const StatusResponse s = t.Status();
  EXPECT_EQ(s.state(), FAILED) << s.reason();
  EXPECT_EQ(s.restarts(), kRestarts);
  EXPECT_LE(highest, 1u + kRestarts);
  EXPECT_TRUE(Contains(s.reason(), "no restarts left")) << s.reason();
}

// An empty state file (made by hand, or by a disk that lost it) is named as
// such, not as "the state of another job (\"\")".
TEST(Elastic, AnEmptyStateFileIsNotAnotherJobs) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(dir != nullptr ? dir : "/tmp") + "/empty.state";
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  JobTracker t(Spec(2, 3, 3), path);
  const absl::Status s = t.Restore();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_TRUE(Contains(std::string(s.message()), "is empty")) << s;
  EXPECT_FALSE(Contains(std::string(s.message()), "another job")) << s;
}

// Every worker silent at once, on a durable coordinator, is its own outage
// far more often than a common death: nobody is declared dead, and no
// restart is spent, until coordinator_grace_ms has passed.
TEST(Elastic, ADurableCoordinatorWaitsOutTheGraceWhenEveryWorkerIsSilent) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(dir != nullptr ? dir : "/tmp") + "/all_silent.state";
  std::remove(path.c_str());
  JobSpec spec = Spec(2, 3, 3);
  constexpr int kGraceMs = 20 * kBeatMs * kMisses;  // 20 heartbeat bounds
  spec.mutable_cluster()->set_coordinator_grace_ms(kGraceMs);
  JobTracker t(spec, path);
  ASSERT_TRUE(t.Restore().ok());
  const std::vector<JoinResponse> first = FormFirst(t, 2);
  {
    Beater b0(t, first[0], "w0", 1);
    Beater b1(t, first[1], "w1", 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }  // both fall silent at once
  std::this_thread::sleep_for(std::chrono::milliseconds(5 * kBeatMs * kMisses));
  StatusResponse s = t.Status();
  EXPECT_EQ(s.state(), RUNNING);
  EXPECT_FALSE(s.regrouping());
  EXPECT_EQ(s.restarts(), 0);
  // They come back one by one within the grace (each connection resumes on
  // its own back-off): the one still silent is not declared dead meanwhile.
  {
    Beater b1(t, first[1], "w1", 10);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(3 * kBeatMs * kMisses));
    EXPECT_FALSE(b1.regroup() || b1.told_to_stop());
    s = t.Status();
    EXPECT_FALSE(s.regrouping());
    EXPECT_EQ(s.restarts(), 0);
  }
  {
    Beater b0(t, first[0], "w0", 20);
    Beater b1(t, first[1], "w1", 20);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_FALSE(b0.regroup() || b0.told_to_stop());
    s = t.Status();
    EXPECT_EQ(s.generation(), 1u);
    EXPECT_FALSE(s.regrouping());
    EXPECT_EQ(s.restarts(), 0);
    // One of them alone falling silent is judged by the usual bound.
    const Clock::time_point killed = b1.Stop();
    ASSERT_TRUE(WaitFor([&] { return b0.regroup(); }));
    EXPECT_LT(Between(killed, b0.regroup_at()), kBoundS + 1.0);
  }
}

TEST(Elastic, PastTheGraceEverySilentWorkerIsDeclaredDead) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(dir != nullptr ? dir : "/tmp") + "/all_silent_long.state";
  std::remove(path.c_str());
  JobSpec spec = Spec(2, 3, 0);
  spec.mutable_cluster()->set_coordinator_grace_ms(600);
  JobTracker t(spec, path);
  ASSERT_TRUE(t.Restore().ok());
  const std::vector<JoinResponse> first = FormFirst(t, 2);
  Clock::time_point silent;
  {
    Beater b0(t, first[0], "w0", 1);
    Beater b1(t, first[1], "w1", 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    b0.Stop();
    silent = b1.Stop();
  }
  ASSERT_TRUE(WaitFor([&] { return t.Status().state() == FAILED; }));
  EXPECT_GE(SecondsSince(silent), 0.6);
}

}  // namespace
}  // namespace cohort

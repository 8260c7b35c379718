#include "worker/worker_process.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "worker/comm/communicator.h"
#include "worker/comm/gloo_store.h"
#include "worker/coordinator_client.h"
#include "worker/heartbeat.h"
#include "worker/trainer.h"

namespace cohort {
namespace {

// After the coordinator says stop, a worker blocked in a collective gets
// this long to notice by itself before the process exits anyway.
constexpr absl::Duration kStopGrace = absl::Seconds(3);

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

bool IsLoopback(const std::string& address) {
  return absl::StartsWith(address, "127.") ||
         absl::StartsWith(address, "localhost:") ||
         absl::StartsWith(address, "[::1]");
}

JoinRequest MakeJoin(const WorkerOptions& o) {
  JoinRequest r;
  r.set_protocol_version(Protocol::CURRENT);
  r.set_host(HostName());
  r.set_pid(getpid());
  r.set_replicas(o.replicas);
  std::random_device rd;
  r.set_worker_id(
      absl::StrFormat("%s:%d:%08x", r.host(), r.pid(), rd() & 0xffffffffu));
  return r;
}

WorkerResult ToWorkerResult(const TrainResult& t) {
  WorkerResult r;
  r.set_steps(t.steps);
  r.set_epochs(t.epochs);
  r.set_samples(t.samples);
  r.set_train_seconds(t.train_seconds);
  r.set_samples_per_s(t.samples_per_s);
  r.set_final_loss(t.final_loss);
  r.set_test_accuracy(t.test_accuracy);
  r.set_test_loss(t.test_loss);
  r.set_parameters(t.parameters);
  r.set_model(t.model);
  return r;
}

bool IsCommunicationError(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kInternal:
      return true;
    default:
      return false;
  }
}

// Exits the process if it is still running kStopGrace after a stop signal:
// a collective stuck on a stopped (not dead) peer would otherwise wait for
// its full timeout.
void ExitAfterGrace(const absl::Status& why) {
  std::thread([why] {
    absl::SleepFor(kStopGrace);
    std::fprintf(stderr, "cohort worker: %s\n",
                 std::string(why.message()).c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }).detach();
}

GlooOptions::Wait GlooWait(CollectiveWait wait) {
  switch (wait) {
    case WAIT_SPIN:
      return GlooOptions::Wait::kSpin;
    case WAIT_BLOCK:
      return GlooOptions::Wait::kBlock;
    default:
      return GlooOptions::Wait::kAuto;
  }
}

absl::Status Train(const WorkerOptions& o, CoordinatorClient& client,
                   const JoinResponse& join, HeartbeatSender& heartbeat,
                   TrainResult* result) {
  const ClusterSpec& cluster = join.job().cluster();
  KvGlooStore store(&client, join.kv_prefix(),
                    absl::Milliseconds(cluster.collective_timeout_ms()));
  GlooOptions gloo;
  gloo.algorithm = cluster.allreduce_algorithm();
  gloo.timeout = absl::Milliseconds(cluster.collective_timeout_ms());
  gloo.wait = GlooWait(cluster.collective_wait());
  gloo.cores_per_rank = o.replicas * std::max(1, o.threads);
  gloo.hostname = !o.host.empty()                ? o.host
                  : IsLoopback(client.address()) ? "127.0.0.1"
                                                 : HostName();
  ASSIGN_OR_RETURN(
      std::unique_ptr<Communicator> comm,
      CreateGlooCommunicator(store, join.rank(), join.world_size(), gloo));
  DistributedContext dist;
  dist.rank = join.rank();
  dist.world_size = join.world_size();
  dist.replica_offset = join.replica_offset();
  dist.total_replicas = join.total_replicas();
  dist.comm = comm.get();
  dist.bucket_bytes = cluster.bucket_bytes();
  dist.epoch_seed = [&client](int64_t epoch) {
    return client.BeginEpoch(epoch);
  };
  dist.on_step = [&heartbeat](const WorkerProgress& p) {
    heartbeat.Update(p);
    return heartbeat.StopReason();
  };
  TrainOptions t;
  t.data_dir = o.data_dir;
  t.replicas = o.replicas;
  t.threads = o.threads > 0 ? o.threads : o.replicas;
  t.quiet = o.quiet || join.rank() != 0;
  t.live_progress = o.live_progress;
  t.distributed = &dist;
  ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer,
                   Trainer::Create(join.job(), t));
  ASSIGN_OR_RETURN(*result, trainer->Run());
  return absl::OkStatus();
}

}  // namespace

absl::Status RunWorker(const WorkerOptions& o) {
  ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorClient> client,
                   CoordinatorClient::Create(o.coordinator));
  ASSIGN_OR_RETURN(JoinResponse join,
                   client->Join(MakeJoin(o), o.connect_timeout));
  if (!o.quiet) {
    std::fprintf(
        stderr, "cohort worker: joined %s as rank %d of %d (generation %llu)\n",
        o.coordinator.c_str(), join.rank(), join.world_size(),
        static_cast<unsigned long long>(join.generation()));
  }
  const ClusterSpec& cluster = join.job().cluster();
  HeartbeatSender heartbeat(client.get(),
                            absl::Milliseconds(cluster.heartbeat_interval_ms()),
                            cluster.heartbeat_misses(), ExitAfterGrace);
  TrainResult result;
  absl::Status s = Train(o, *client, join, heartbeat, &result);
  if (!s.ok()) {
    // A collective fails the moment a peer dies, before the coordinator has
    // declared that peer dead. Its verdict names the root cause (the dead
    // worker's rank and host), so wait for it as long as it can take.
    if (IsCommunicationError(s)) {
      const absl::Time until =
          absl::Now() +
          absl::Milliseconds(cluster.heartbeat_interval_ms()) *
              (cluster.heartbeat_misses() + 1) +
          absl::Seconds(1);
      while (heartbeat.StopReason().ok() && absl::Now() < until) {
        absl::SleepFor(absl::Milliseconds(50));
      }
    }
    absl::Status why = heartbeat.StopReason();
    if (!why.ok()) s = why;
    client->Finish(false, std::string(s.message()), WorkerResult())
        .IgnoreError();
    return s;
  }
  return client->Finish(true, "", ToWorkerResult(result));
}

}  // namespace cohort

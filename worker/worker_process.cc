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
#include "absl/strings/str_join.h"
#include "client/coordinator_client.h"
#include "client/ps_client.h"
#include "client/restart_window.h"
#include "common/sampler_seed.h"
#include "common/status_macros.h"
#include "worker/advertised_host.h"
#include "worker/collective_interrupt.h"
#include "worker/comm/communicator.h"
#include "worker/comm/connect_abort.h"
#include "worker/comm/gloo_store.h"
#include "worker/exchange/ps_exchange.h"
#include "worker/gpu/gpu_plugin.h"
#include "worker/heartbeat.h"
#include "worker/stop_signal_watch.h"
#include "worker/stop_watchdog.h"
#include "worker/timeline.h"
#include "worker/trainer.h"
#include "worker/worker_metrics.h"

namespace cohort {
namespace {

// After the coordinator says stop, a worker blocked in a collective gets
// this long to notice by itself before the process exits anyway.
constexpr absl::Duration kStopGrace = absl::Seconds(3);

// How long past its bound (ConnectBound) connecting to the peers may take
// before the worker gives up on it (StopSignalWatch::Waiting).
constexpr absl::Duration kConnectSlack = absl::Seconds(2);

// Every member starts connecting the moment its generation forms, and each
// address it dials is already listening, so a connect that takes longer
// than a few heartbeat bounds means an address peers cannot reach: it is
// given up after max(10 s, 3 heartbeat bounds), or collective_timeout_ms
// when that is shorter, rather than after the collective timeout alone.
absl::Duration ConnectBound(const ClusterSpec& c) {
  const absl::Duration bound = std::max(
      absl::Seconds(10),
      absl::Milliseconds(3 * c.heartbeat_interval_ms() * c.heartbeat_misses()));
  return std::min(bound, absl::Milliseconds(c.collective_timeout_ms()));
}

// How long after a termination signal the step in flight may stay blocked
// in a collective before its collectives are aborted (stop_signal_watch.h):
// long enough for peers signalled at about the same time to reach the same
// step boundary, short enough to honour the signal within two seconds.
constexpr absl::Duration kSignalStepGrace = absl::Milliseconds(1500);

JoinRequest MakeJoin(const WorkerOptions& o) {
  JoinRequest r;
  r.set_protocol_version(Protocol::CURRENT);
  r.set_host(HostName());
  r.set_address(o.host);
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
  AddMetrics(t.test_metrics, r.mutable_test_metrics());
  r.set_skipped_samples(t.skipped_samples);
  r.set_stopped_early(t.stopped_early);
  r.set_best_metric_name(t.best_metric_name);
  r.set_best_metric(t.best_metric);
  r.set_best_step(t.best_step);
  if (t.final_lr >= 0) r.set_final_lr(t.final_lr);
  for (const EpochResult& e : t.epoch_results) {
    EpochSummary* s = r.add_epoch_results();
    s->set_epoch(e.epoch + 1);
    s->set_steps(e.steps);
    s->set_train_loss(e.train_loss);
    s->set_test_accuracy(e.test_accuracy);
    s->set_test_loss(e.test_loss);
    s->set_seconds(e.seconds);
    s->set_wall_seconds(e.wall_seconds);
    AddMetrics(e.test_metrics, s->mutable_test_metrics());
  }
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

// Where shard `index` serves now, as the coordinator knows it (a
// replacement for a dead shard registers with a new address).
absl::StatusOr<std::string> ShardAddress(CoordinatorClient& coordinator,
                                         int index) {
  ASSIGN_OR_RETURN(StatusResponse status,
                   coordinator.GetStatus(absl::Seconds(5)));
  for (const ShardStatus& s : status.shards()) {
    if (s.index() == index) return s.address();
  }
  return absl::NotFoundError(
      absl::StrCat("the coordinator has no shard ", index));
}

// FP16 and BF16 halve the pushes; the spec refuses the other kinds in PS
// mode.
TensorChunk::Encoding PushEncoding(const CompressionSpec& c) {
  switch (c.kind()) {
    case CompressionSpec::FP16:
      return TensorChunk::FLOAT16;
    case CompressionSpec::BF16:
      return TensorChunk::BFLOAT16;
    default:
      return TensorChunk::FLOAT32;
  }
}

// Partition plan from the coordinator, a client to the shards, the initial
// parameters and the sparse tables from rank 0 to the shards, and the
// parameters back from them to everyone.
absl::Status PsSetup(CoordinatorClient& coordinator, const JoinResponse& join,
                     const std::string& worker_id, float* params,
                     const std::vector<int64_t>& param_sizes,
                     const std::vector<SparseTableInfo>& tables,
                     const SecurityOptions& security, PsLink* ps) {
  ASSIGN_OR_RETURN(PlanPartitionsResponse plan,
                   coordinator.PlanPartitions(param_sizes));
  PsClientOptions po;
  po.shard_addresses.assign(join.shard_addresses().begin(),
                            join.shard_addresses().end());
  po.partitions.assign(plan.partitions().begin(), plan.partitions().end());
  po.worker_id = worker_id;
  po.rank = join.rank();
  po.security = security;
  po.tables = tables;
  po.push_encoding = PushEncoding(join.job().compression());
  if (join.job().ps().rpc_timeout_ms() > 0) {
    po.rpc_timeout = absl::Milliseconds(join.job().ps().rpc_timeout_ms());
  }
  po.restart_window = ShardRestartWindow(join.job());
  if (po.restart_window > absl::ZeroDuration()) {
    po.shard_address = [&coordinator](int index) {
      return ShardAddress(coordinator, index);
    };
  }
  ASSIGN_OR_RETURN(ps->client, PsClient::Create(po));
  if (join.rank() == 0) {
    RETURN_IF_ERROR(
        ps->client->Init(params, join.world_size(), join.total_replicas()));
  }
  return ps->client->Pull(0, params);
}

// SSP and ASYNC: claims chunks of an epoch from the coordinator's counter
// for that epoch (scoped to the generation, like every key).
absl::StatusOr<int64_t> ClaimChunks(CoordinatorClient& client, int64_t epoch,
                                    int count) {
  ASSIGN_OR_RETURN(const int64_t end,
                   client.Add(absl::StrCat("ps/chunks/", epoch), count));
  return end - count;
}

void LogPsTotals(const PsLink& ps) {
  const PsClient::Stats& t = ps.totals;
  std::fprintf(stderr,
               "cohort worker: parameter servers: pushed %.1f MB in %.2f s, "
               "pulled %.1f MB in %.2f s, largest version lag %lld\n",
               t.bytes_pushed / 1e6, t.push_seconds, t.bytes_pulled / 1e6,
               t.pull_seconds, static_cast<long long>(t.max_version_lag));
}

// The epoch's sampler seed from the coordinator (which also learns that
// the epoch began). A durable coordinator that does not answer at once may
// be restarting or cut off: the seed is a function of the job seed and the
// epoch, so the worker computes it and trains on; its heartbeats tell the
// coordinator the epoch later. Anything else the coordinator says (a
// regroup, a stale generation) stops the worker as before.
absl::StatusOr<uint64_t> EpochSeed(CoordinatorClient& client,
                                   const JoinResponse& join, int64_t epoch) {
  if (!join.coordinator_durable()) return client.BeginEpoch(epoch);
  absl::StatusOr<uint64_t> seed = client.BeginEpoch(epoch, /*retry=*/false);
  if (seed.ok() || !(absl::IsUnavailable(seed.status()) ||
                     absl::IsDeadlineExceeded(seed.status()))) {
    return seed;
  }
  std::fprintf(stderr,
               "cohort worker: the coordinator did not answer at the start "
               "of epoch %lld (%s); its sampler seed is computed here from "
               "the job seed, and training goes on\n",
               static_cast<long long>(epoch + 1),
               std::string(seed.status().message()).c_str());
  return SamplerSeed(join.job_seed(), epoch);
}

// What every worker's trainer gets from its coordinator: its place in the
// job, the epochs' sampler seeds, and a way to report progress (and learn
// that it must stop).
DistributedContext JobContext(const JoinResponse& join,
                              CoordinatorClient& client,
                              HeartbeatSender& heartbeat,
                              WorkerMetrics* metrics) {
  DistributedContext dist;
  dist.rank = join.rank();
  dist.world_size = join.world_size();
  dist.replica_offset = join.replica_offset();
  dist.total_replicas = join.total_replicas();
  dist.epoch_seed = [&client, &join](int64_t epoch) {
    return EpochSeed(client, join, epoch);
  };
  dist.on_step = [&heartbeat, metrics](const WorkerProgress& p) {
    heartbeat.Update(p);
    if (metrics != nullptr) metrics->Update(p);
    return heartbeat.StopReason();
  };
  return dist;
}

// --checkpoint-dir, else the job's, else the fallback (for --export).
std::string CheckpointDir(const WorkerOptions& o, const JobSpec& job) {
  if (!o.checkpoint_dir.empty()) return o.checkpoint_dir;
  if (!job.checkpoint().dir().empty()) return "";  // the loop reads the job's
  return o.fallback_checkpoint_dir;
}

TrainOptions WorkerTrainOptions(const WorkerOptions& o,
                                const JoinResponse& join,
                                const DistributedContext* dist,
                                Timeline* timeline) {
  TrainOptions t;
  t.timeline = timeline;
  t.timeline_layers = o.timeline_layers;
  t.stop_signal = o.stop_signal;
  t.data_dir = o.data_dir;
  t.replicas = o.replicas;
  t.threads = o.threads > 0 ? o.threads : o.replicas;
  t.gpus = o.gpus;
  t.quiet = o.quiet || join.rank() != 0;
  t.live_progress = o.live_progress;
  t.slowdown =
      o.slowdown_rank < 0 || o.slowdown_rank == join.rank() ? o.slowdown : 1.0;
  t.min_step_seconds = o.min_step_seconds;
  t.distributed = dist;
  t.epochs = o.epochs;
  t.max_steps = o.max_steps;
  t.init_from = o.init_from;
  t.checkpoint_dir = CheckpointDir(o, join.job());
  t.log_dir = o.log_dir;
  return t;
}

// The training flags that decide how far and from where every worker
// trains, as one line to compare (init_from by presence: the path may
// differ from machine to machine).
std::string TrainingFlagsText(const WorkerOptions& o) {
  auto value = [](int64_t v) {
    return v < 0 ? std::string("unset") : absl::StrCat(v);
  };
  return absl::StrCat("--epochs=", value(o.epochs),
                      " --max-steps=", value(o.max_steps),
                      " --init-from=", o.init_from.empty() ? "unset" : "given");
}

// Workers that train different numbers of steps leave one waiting in a
// collective for a peer that has stopped, and different starting weights
// drift apart: rank 0 publishes its training flags (per generation, like
// every key) and every other rank compares its own.
absl::Status AgreeOnTrainingFlags(const WorkerOptions& o,
                                  CoordinatorClient& client,
                                  const JoinResponse& join) {
  if (join.world_size() <= 1) return absl::OkStatus();
  const std::string key = absl::StrCat(join.kv_prefix(), "training_flags");
  const std::string mine = TrainingFlagsText(o);
  if (join.rank() == 0) return client.Set(key, mine);
  RETURN_IF_ERROR(client.Wait(
      {key}, absl::Milliseconds(join.job().cluster().collective_timeout_ms())));
  ASSIGN_OR_RETURN(const std::optional<std::string> theirs, client.Get(key));
  if (!theirs || *theirs == mine) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "this worker's training flags (", mine, ") differ from rank 0's (",
      *theirs,
      "): give every worker of the job the same --epochs, --max-steps and "
      "--init-from"));
}

// GPU workers: NCCL over every GPU of the job for the gradients (Gloo
// still carries the loop's small collectives: state agreement, sums).
absl::StatusOr<std::shared_ptr<NcclCommunicator>> GpuCommunicators(
    const WorkerOptions& o, CoordinatorClient& client,
    const JoinResponse& join) {
  const ClusterSpec& cluster = join.job().cluster();
  GpuWorkerPlacement placement;
  placement.rank = join.rank();
  placement.world_size = join.world_size();
  placement.replica_offset = join.replica_offset();
  placement.total_replicas = join.total_replicas();
  placement.gpus = o.gpus;
  ASSIGN_OR_RETURN(const GpuPluginApi* gpu, LoadGpuPlugin());
  return gpu->create_worker_nccl(
      client, absl::StrCat(join.kv_prefix(), "nccl/"), placement,
      cluster.nccl_algorithm(),
      absl::Milliseconds(cluster.collective_timeout_ms()));
}

// The coordinator's verdict, on the heartbeat thread. A collective blocked
// on a peer that the coordinator already declared dead ends now, not at the
// collective timeout; an orderly stop leaves the step in flight to finish
// (and its final checkpoint to be written). Any stop but a regroup ends a
// worker that waits with nothing to save at once, and otherwise starts the
// grace period after which a stuck worker exits.
void OnVerdict(const HeartbeatSender::Verdict& v, bool elastic,
               CollectiveInterrupt& interrupt, StopWatchdog& watchdog,
               StopSignalWatch& watch) {
  // An elastic job's worker that was declared dead (a link cut for longer
  // than the heartbeat bound), or that lost the coordinator (the same cut,
  // seen first from this side), joins anew, like one whose generation ended.
  if (v.regroup || ((v.dropped || v.lost) && elastic)) {
    interrupt.Interrupt(v.why);
    return;
  }
  // Connecting to peers or waiting for a verdict: nothing to save.
  watch.EndIfWaiting(v.why);
  if (!v.orderly) interrupt.Interrupt(v.why);
  watchdog.Arm(v.why);
}

// Whether this worker regroups with its peers when its generation ends,
// instead of failing: all-reduce jobs with restarts allowed, on CPU workers
// (a GPU worker's NCCL communicators are not re-formed mid-job yet).
bool Elastic(const WorkerOptions& o, const JobSpec& job) {
  return job.mode() != PS && o.gpus.empty() && job.cluster().max_restarts() > 0;
}

absl::Status Train(const WorkerOptions& o, CoordinatorClient& client,
                   const JoinResponse& join, const std::string& worker_id,
                   HeartbeatSender& heartbeat, CollectiveInterrupt* interrupt,
                   StopSignalWatch* watch, ElasticState* elastic,
                   Timeline* timeline, TrainResult* result) {
  const ClusterSpec& cluster = join.job().cluster();
  {
    StopSignalWatch::Waiting waiting(watch,
                                     "comparing its flags with rank 0's");
    RETURN_IF_ERROR(AgreeOnTrainingFlags(o, client, join));
  }
  KvGlooStore store(&client, join.kv_prefix(),
                    absl::Milliseconds(cluster.collective_timeout_ms()));
  // A generation that ends while its ranks connect (a peer left to rejoin)
  // would otherwise leave this rank waiting for that peer until the
  // connect's bound below ends the process.
  ConnectAbort connect_abort;
  GlooOptions gloo;
  gloo.abort = &connect_abort;
  gloo.algorithm = cluster.allreduce_algorithm();
  gloo.timeout = absl::Milliseconds(cluster.collective_timeout_ms());
  gloo.wait = GlooWait(cluster.collective_wait());
  gloo.cores_per_rank = o.replicas * std::max(1, o.threads);
  gloo.hostname = o.host;  // resolved once, in RunGenerations
  gloo.ports = o.collective_ports;
  std::unique_ptr<Communicator> comm;
  {
    // Bounded here: Gloo's connect to an unreachable peer took 27 s with a
    // 5 s timeout (tests/multihost_test).
    const std::string late = UnreachablePeersHint(o.host, join);
    StopSignalWatch::Waiting waiting(
        watch, "connecting to its peers",
        absl::Now() + ConnectBound(cluster) + kConnectSlack, late.c_str());
    ScopedInterruptible abortable(interrupt, &connect_abort);
    ASSIGN_OR_RETURN(comm, CreateGlooCommunicator(store, join.rank(),
                                                  join.world_size(), gloo));
  }
  ScopedInterruptible interruptible(interrupt, comm.get());
  DistributedContext dist = JobContext(join, client, heartbeat, o.metrics);
  dist.comm = comm.get();
  dist.bucket_bytes = cluster.bucket_bytes();
  std::shared_ptr<NcclCommunicator> nccl;
  if (!o.gpus.empty()) {
    StopSignalWatch::Waiting waiting(watch, "connecting to its peers (NCCL)");
    ASSIGN_OR_RETURN(nccl, GpuCommunicators(o, client, join));
    dist.nccl = nccl.get();
  }
  PsLink ps;
  if (join.job().mode() == PS) {
    dist.ps_mode = true;
    dist.ps_connect = [&](float* params, const std::vector<int64_t>& sizes,
                          const std::vector<SparseTableInfo>& tables)
        -> absl::StatusOr<PsLink*> {
      RETURN_IF_ERROR(PsSetup(client, join, worker_id, params, sizes, tables,
                              o.security, &ps));
      return &ps;
    };
    dist.claim_chunks = [&client](int64_t epoch, int count) {
      return ClaimChunks(client, epoch, count);
    };
  }
  TrainOptions t = WorkerTrainOptions(o, join, &dist, timeline);
  if (Elastic(o, join.job())) t.elastic = elastic;
  absl::Status s = [&]() -> absl::Status {
    StopSignalWatch::Training training(watch, interrupt);
    ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer,
                     Trainer::Create(join.job(), t));
    ASSIGN_OR_RETURN(*result, trainer->Run());
    return absl::OkStatus();
  }();
  if (!s.ok()) {
    // Peers still inside a collective with this rank fail now, not at
    // their timeout, and the communicator hangs up without a barrier.
    comm->Abort(s);
    return s;
  }
  if (ps.client != nullptr && !o.quiet) LogPsTotals(ps);
  return absl::OkStatus();
}

// How long a worker whose collective failed waits for the coordinator's
// verdict: as long as declaring the dead peer dead can take.
absl::Duration VerdictWait(const ClusterSpec& c) {
  return absl::Milliseconds(c.heartbeat_interval_ms()) *
             (c.heartbeat_misses() + 1) +
         absl::Seconds(1);
}

// Sets the client's deadlines from the heartbeat interval, and, for a
// durable coordinator (which may be restarting), keeps training through its
// absence for the grace period instead of the usual heartbeat bound.
// Returns the heartbeat misses to tolerate.
int TolerateCoordinatorOutage(const WorkerOptions& o, const JoinResponse& join,
                              CoordinatorClient& client) {
  const ClusterSpec& cluster = join.job().cluster();
  int misses = cluster.heartbeat_misses();
  const int64_t interval =
      std::max<int64_t>(1, cluster.heartbeat_interval_ms());
  client.FollowHeartbeats(cluster);
  if (!join.coordinator_durable()) return misses;
  misses = std::max<int64_t>(
      misses, (cluster.coordinator_grace_ms() + interval - 1) / interval);
  client.set_retry_window(absl::Milliseconds(cluster.coordinator_grace_ms()));
  if (!o.quiet && join.generation() == 1) {
    std::fprintf(stderr,
                 "cohort worker: the coordinator is durable: training goes "
                 "on for up to %.0f s without it\n",
                 cluster.coordinator_grace_ms() / 1000.0);
  }
  return misses;
}

void LogJoined(const WorkerOptions& o, const JoinResponse& join, bool rejoin) {
  if (o.quiet) return;
  std::fprintf(
      stderr, "cohort worker: %s %s as rank %d of %d (generation %llu%s)\n",
      rejoin ? "rejoined" : "joined", o.coordinator.c_str(), join.rank(),
      join.world_size(), static_cast<unsigned long long>(join.generation()),
      join.restarts() > 0 ? absl::StrCat(", restart ", join.restarts()).c_str()
                          : "");
}

}  // namespace

namespace {

// The joined line, the metrics' rank and the timeline's process name.
void AnnounceJoin(const WorkerOptions& o, const JoinRequest& request,
                  const JoinResponse& join, Timeline* timeline) {
  LogJoined(o, join, request.leaving_generation() > 0);
  if (o.metrics != nullptr) o.metrics->Joined(join);
  if (timeline != nullptr) {
    timeline->SetProcess(join.rank(),
                         absl::StrCat("worker rank ", join.rank(), " (",
                                      request.host(), ":", request.pid(), ")"));
  }
}

// What the caller writes after a finished job (rank 0's report and export).
void RecordOutcome(const WorkerOptions& o, const JoinResponse& join,
                   const TrainResult& result) {
  if (o.outcome == nullptr) return;
  o.outcome->rank = join.rank();
  o.outcome->world_size = join.world_size();
  o.outcome->result = result;
  const std::string dir = CheckpointDir(o, join.job());
  o.outcome->checkpoint_dir =
      !dir.empty() ? dir : join.job().checkpoint().dir();
}

// Heartbeats unanswered for the coordinator's own bound (`lost`) may mean a
// coordinator too busy to answer in time, as on a loaded machine, rather
// than one gone. A coordinator that still answers status queries is asked
// until it ends the job or `wait` passes: its verdict names the root cause
// (the dead peer), which the silence does not.
absl::Status AskForTheVerdict(CoordinatorClient& client, absl::Status lost,
                              absl::Duration wait) {
  const absl::Time until = absl::Now() + wait;
  while (true) {
    absl::StatusOr<StatusResponse> status = client.GetStatus(absl::Seconds(2));
    if (!status.ok()) return lost;
    if (status->state() == FAILED || status->state() == STOPPED) {
      return absl::AbortedError(absl::StrCat(
          "the coordinator stopped the job (", JobState_Name(status->state()),
          "): ", status->reason()));
    }
    if (absl::Now() >= until) return lost;
    absl::SleepFor(absl::Milliseconds(100));
  }
}

// Reports a generation that failed with `s` and returns why it failed. A
// collective fails the moment a peer dies, before the coordinator has
// declared that peer dead; its verdict names the root cause (the dead
// worker's rank and host), so it is waited for as long as it can take.
absl::Status EndFailedGeneration(absl::Status s, const ClusterSpec& cluster,
                                 HeartbeatSender& heartbeat,
                                 StopSignalWatch& watch,
                                 CoordinatorClient& client) {
  if (IsCommunicationError(s)) {
    StopSignalWatch::Waiting waiting(&watch,
                                     "waiting for the coordinator's verdict");
    const absl::Time until = absl::Now() + VerdictWait(cluster);
    while (heartbeat.StopReason().ok() && absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(50));
    }
  }
  absl::Status why = heartbeat.StopReason();
  if (heartbeat.Lost()) {
    why = AskForTheVerdict(client, std::move(why), VerdictWait(cluster));
  }
  if (!why.ok()) s = why;
  client.Finish(false, std::string(s.message()), WorkerResult()).IgnoreError();
  return s;
}

// Joins, trains and reports, one generation after another.
absl::Status RunJoined(const WorkerOptions& o, CoordinatorClient& client,
                       Timeline* timeline) {
  JoinRequest request = MakeJoin(o);
  ElasticState elastic;
  StopSignalWatch watch(o.stop_signal, kSignalStepGrace);
  // Each pass is one generation of the job; an elastic worker whose
  // generation ends (a peer failed, or the world grows) joins the next.
  while (true) {
    absl::StatusOr<JoinResponse> joined;
    {
      StopSignalWatch::Waiting waiting(&watch, "joining the job");
      joined = client.Join(request, o.connect_timeout);
    }
    ASSIGN_OR_RETURN(JoinResponse join, std::move(joined));
    AnnounceJoin(o, request, join, timeline);
    const ClusterSpec& cluster = join.job().cluster();
    // Declared before the heartbeat sender, so destroyed after it: a stop
    // that arrives for this generation cannot outlive it (stop_watchdog.h).
    StopWatchdog watchdog(kStopGrace);
    CollectiveInterrupt interrupt;
    HeartbeatSender heartbeat(
        &client, absl::Milliseconds(cluster.heartbeat_interval_ms()),
        TolerateCoordinatorOutage(o, join, client),
        [&](const HeartbeatSender::Verdict& v) {
          OnVerdict(v, Elastic(o, join.job()), interrupt, watchdog, watch);
        });
    TrainResult result;
    absl::Status s = Train(o, client, join, request.worker_id(), heartbeat,
                           &interrupt, &watch, &elastic, timeline, &result);
    if (s.ok()) {
      RecordOutcome(o, join, result);
      return client.Finish(true, "", ToWorkerResult(result));
    }
    if (o.stop_signal != nullptr && o.stop_signal->load()) {
      // Told to stop (a pod being deleted): leave without reporting a
      // failure. Peers see this worker go; an elastic job goes on without
      // it, from the final checkpoint or their own state.
      return s;
    }
    const bool elastic_job = Elastic(o, join.job());
    if (elastic_job &&
        (heartbeat.Regroup() || heartbeat.Dropped() || heartbeat.Lost() ||
         (IsCommunicationError(s) && heartbeat.StopReason().ok()))) {
      // Rejoining at once tells the coordinator that this generation is
      // broken, which is quicker than waiting for it to notice.
      if (!o.quiet) {
        std::fprintf(stderr,
                     "cohort worker: generation %llu is over (%s); rejoining\n",
                     static_cast<unsigned long long>(join.generation()),
                     std::string(s.message()).c_str());
      }
      request.set_leaving_generation(join.generation());
      continue;
    }
    return EndFailedGeneration(std::move(s), cluster, heartbeat, watch, client);
  }
}

// Checks the options and resolves the advertised host, then joins and
// trains (RunJoined).
absl::Status RunGenerations(const WorkerOptions& o, Timeline* timeline) {
  if (!(o.slowdown >= 1.0)) {  // NaN too
    return absl::InvalidArgumentError(absl::StrCat(
        "--slowdown must be at least 1 (1: full speed), got ", o.slowdown));
  }
  if (!(o.min_step_seconds >= 0) || o.min_step_seconds > 3600) {
    return absl::InvalidArgumentError(
        absl::StrCat("--min-step-ms must be in [0, 3600000], got ",
                     o.min_step_seconds * 1000));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorClient> client,
                   CoordinatorClient::Create(o.coordinator, o.security));
  // From here on o.host is the resolved address Gloo advertises.
  WorkerOptions resolved = o;
  ASSIGN_OR_RETURN(resolved.host, AdvertisedHost(o.host, client->address()));
  return RunJoined(resolved, *client, timeline);
}

}  // namespace

absl::Status RunWorker(const WorkerOptions& o) {
  if (o.timeline_path.empty()) return RunGenerations(o, nullptr);
  Timeline timeline(0, "cohort worker");
  // An empty trace first: a path that cannot be written is refused before
  // the worker joins, not after the training it was to record.
  absl::Status s = timeline.Write(o.timeline_path);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("--timeline: ", s.message()));
  }
  s = RunGenerations(o, &timeline);
  absl::Status written = timeline.Write(o.timeline_path);
  if (!written.ok() && s.ok()) {
    return absl::Status(written.code(),
                        absl::StrCat("--timeline: ", written.message()));
  }
  return s;
}

}  // namespace cohort

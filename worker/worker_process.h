// One worker process of a multi-worker job: joins the coordinator, builds
// its communicator, trains its share and reports the result.
#ifndef COHORT_WORKER_WORKER_PROCESS_H_
#define COHORT_WORKER_WORKER_PROCESS_H_

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/security.h"
#include "worker/comm/port_range.h"
#include "worker/trainer.h"

namespace cohort {

class WorkerMetrics;

// How a worker's training ended, for the outputs its caller writes (rank
// 0's report and export).
struct WorkerOutcome {
  int rank = 0;
  int world_size = 0;
  TrainResult result;
  // Where rank 0 wrote its checkpoints (the final one is of step
  // result.steps); empty: none.
  std::string checkpoint_dir;
};

struct WorkerOptions {
  std::string coordinator;  // HOST:PORT
  int replicas = 1;         // local replicas (CPU replicas or GPUs)
  // CUDA devices, one replica each; empty: CPU replicas. GPU workers
  // all-reduce with NCCL across every GPU of the job.
  std::vector<int> gpus;
  int threads = 0;       // 0: one per replica
  std::string data_dir;  // overrides the spec's
  // The address peers reach this worker's collectives on. Empty: the local
  // address of this machine's route to the coordinator.
  std::string host;
  // The ports Gloo listens on for peers; empty: any free port.
  PortRange collective_ports;
  absl::Duration connect_timeout = absl::Seconds(60);
  bool quiet = false;
  bool live_progress = false;
  // >= 1: run this many times slower than the hardware allows (a simulated
  // straggler; see TrainOptions::slowdown).
  double slowdown = 1.0;
  // Only the worker of this rank slows down; -1: every worker.
  int slowdown_rank = -1;
  // See TrainOptions::min_step_seconds; every worker.
  double min_step_seconds = 0;
  // The job token and TLS for the coordinator and the shards
  // (common/security.h).
  SecurityOptions security;
  // Receives the worker's place in the job at every join and its progress
  // at every report, for its Prometheus /metrics
  // (worker/worker_metrics.h). Borrowed; null: none.
  WorkerMetrics* metrics = nullptr;
  // Non-empty: write a Chrome trace of every step's phases here (checked
  // writable before joining; written when the worker ends, ok or not).
  std::string timeline_path;
  // With timeline_path: also each layer's forward and backward
  // (TrainOptions::timeline_layers).
  bool timeline_layers = false;
  // Set by SIGTERM (cli/stop_signal.h): the worker stops after the step in
  // flight, rank 0 writes a final checkpoint, and the worker leaves without
  // failing the job (an elastic job regroups without it). Borrowed.
  const std::atomic<bool>* stop_signal = nullptr;
  // Override the job's, as TrainOptions' fields of the same names do. Every
  // worker of a job must be given the same epochs, max_steps and (whether
  // there is an) init_from: a worker whose differ from rank 0's is refused
  // when the generation forms, rather than wait in a collective for a peer
  // that stopped.
  int64_t epochs = -1;
  int64_t max_steps = -1;
  std::string init_from;
  std::string log_dir;         // overrides the spec's log.dir (rank 0 writes)
  std::string checkpoint_dir;  // rank 0 writes checkpoints here
  // The checkpoint directory when neither checkpoint_dir nor the job names
  // one (so that rank 0 leaves a final checkpoint to export). Empty: none.
  std::string fallback_checkpoint_dir;
  // Receives how the last generation ended, when the worker finished its
  // training. Borrowed; null: not wanted.
  WorkerOutcome* outcome = nullptr;
};

// Runs until the job ends. OK when this worker finished its training; an
// error naming what failed (the coordinator, a peer, the data) otherwise.
absl::Status RunWorker(const WorkerOptions& options);

}  // namespace cohort

#endif  // COHORT_WORKER_WORKER_PROCESS_H_

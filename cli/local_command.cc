// `cohort local`: a whole job on this machine -- a coordinator in this
// process and N worker processes on loopback -- with live progress.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cli/cluster_commands.h"
#include "cli/devices.h"
#include "cli/flags.h"
#include "cli/output_paths.h"
#include "cli/train_command.h"
#include "cli/training_flags.h"
#include "cli/worker_count_flags.h"
#include "common/files.h"
#include "common/machine_memory.h"
#include "common/memory_estimate.h"
#include "common/model_sizes.h"
#include "common/spec.h"
#include "common/spec_workers.h"
#include "common/status_macros.h"
#include "server/coordinator.h"

namespace cohort {
namespace {

std::atomic<int> g_signal{0};

void OnSignal(int sig) { g_signal.store(sig); }

struct Child {
  std::string name;  // "worker process 1", "shard process 0"
  pid_t pid = -1;
  bool running = true;
  int status = 0;
};

absl::StatusOr<pid_t> Spawn(const char* self, std::vector<std::string> args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(self));
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    execv(self, argv.data());
    std::fprintf(stderr, "cohort local: cannot run %s\n", self);
    std::_Exit(127);
  }
  return pid;
}

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(status));
  }
  return absl::StrCat("exited with status ", WEXITSTATUS(status));
}

// Reaps children that have ended; returns the first failure seen.
void Reap(std::vector<Child>& children, std::string* failure) {
  for (size_t i = 0; i < children.size(); ++i) {
    Child& c = children[i];
    if (!c.running) continue;
    int status = 0;
    if (waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
    c.running = false;
    c.status = status;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && failure->empty()) {
      *failure =
          absl::StrCat(c.name, " (pid ", c.pid, ") ", DescribeExit(status));
    }
  }
}

bool AnyRunning(const std::vector<Child>& children) {
  for (const Child& c : children) {
    if (c.running) return true;
  }
  return false;
}

// Asks nicely, then insists.
void StopChildren(std::vector<Child>& children, std::string* failure) {
  const absl::Time soft = absl::Now() + absl::Seconds(5);
  while (AnyRunning(children) && absl::Now() < soft) {
    Reap(children, failure);
    absl::SleepFor(absl::Milliseconds(50));
  }
  for (Child& c : children) {
    if (c.running) kill(c.pid, SIGTERM);
  }
  const absl::Time hard = absl::Now() + absl::Seconds(3);
  while (AnyRunning(children) && absl::Now() < hard) {
    Reap(children, failure);
    absl::SleepFor(absl::Milliseconds(50));
  }
  for (Child& c : children) {
    if (c.running) {
      kill(c.pid, SIGKILL);
      waitpid(c.pid, &c.status, 0);
      c.running = false;
    }
  }
}

void ShowProgress(const StatusResponse& s, bool live) {
  double rate = 0, loss = 0;
  for (const WorkerStatus& w : s.workers()) {
    rate += w.progress().samples_per_s();
    loss += w.progress().loss() / std::max(1, s.workers_size());
  }
  const std::string line = absl::StrFormat(
      "%s | epoch %d | step %d | %d workers | %.0f samples/s | loss %.4f",
      JobState_Name(s.state()), s.epoch() + 1, s.step(), s.workers_size(), rate,
      loss);
  std::fprintf(stderr, live ? "\r\033[K%s" : "%s\n", line.c_str());
  std::fflush(stderr);
}

// "  \"key\": value," -> value, from the report the coordinator wrote.
std::optional<double> ReportNumber(const std::string& json,
                                   const std::string& key) {
  const std::string needle = absl::StrCat("\"", key, "\": ");
  const size_t at = json.find(needle);
  if (at == std::string::npos) return std::nullopt;
  const size_t start = at + needle.size();
  const size_t end = json.find_first_of(",\n}", start);
  double v;
  if (!absl::SimpleAtod(json.substr(start, end - start), &v)) {
    return std::nullopt;
  }
  return v;
}

void PrintResult(const std::string& report) {
  absl::StatusOr<std::string> json = ReadFile(report);
  if (!json.ok()) return;
  auto num = [&](const char* k) { return ReportNumber(*json, k).value_or(-1); };
  std::printf(
      "result: workers %.0f | steps %.0f | epochs %.0f | %.0f samples/s | "
      "train %.2fs | final loss %.4f",
      num("world_size"), num("steps"), num("epochs"), num("samples_per_s"),
      num("train_seconds"), num("final_loss"));
  if (num("test_accuracy") >= 0) {
    std::printf(" | test accuracy %.2f%%", 100 * num("test_accuracy"));
  }
  // A regression's or a click-through-rate model's metrics, found after
  // "test_metrics" in the report.
  const size_t at = json->find("\"test_metrics\": {");
  if (at != std::string::npos) {
    const std::string metrics = json->substr(at, json->find('}', at) - at);
    for (const char* key : {"mse", "mae", "r2", "auc", "normalized_entropy"}) {
      const std::optional<double> v = ReportNumber(metrics, key);
      if (v) std::printf(" | test %s %.4g", key, *v);
    }
  }
  std::printf("\n");
  std::fflush(stdout);
}

// Worker i's --timeline file: FILE.w<i>.json (a .json ending on FILE is
// moved after the worker's number).
std::string LocalTimelinePath(const std::string& file, int64_t worker) {
  std::string stem = file;
  if (absl::EndsWith(stem, ".json")) stem.resize(stem.size() - 5);
  return absl::StrCat(stem, ".w", worker, ".json");
}

// The flags of `cohort local`.
struct LocalFlags {
  std::string job, devices, replicas, listen = "127.0.0.1:0", data_dir;
  std::string straggler, timeline;
  bool timeline_layers = false;
  int64_t threads = 0, shards = 0, min_step_ms = 0;
  WorkerCountFlags counts;
  TrainingFlags training;
  SecurityOptions security;
  // Worker processes to start: the job's maximum, once the counts are
  // resolved (LocalCoordinatorOptions).
  int64_t workers = 0;
};

// `cohort local` starts this many workers when neither a flag nor the
// spec's cluster section says.
constexpr int kLocalWorkers = 2;

void AddLocalFlags(FlagSet& flags, LocalFlags* f) {
  flags.String("job", &f->job, "job spec (.textproto); required", "FILE");
  AddWorkerCountFlags(
      flags, &f->counts,
      "the spec's cluster section if it asks for more than 1, else 2; local "
      "starts the job's maximum of worker processes");
  flags.String("devices", &f->devices,
               "cpu:N (per worker), gpu:all or gpu:I,J,... (dealt out to the "
               "workers; default: every GPU if there is one, else cpu:1)",
               "DEVICES");
  flags.String("replicas", &f->replicas, "older name of --devices", "DEVICES");
  flags.Int("threads", &f->threads,
            "compute threads per worker (default: one per replica)", 1, 1024);
  flags.String("listen", &f->listen,
               "coordinator HOST:PORT (default 127.0.0.1:0)", "HOST:PORT");
  flags.String("data-dir", &f->data_dir,
               "data set directory (default: the spec's data.dir)", "DIR");
  flags.Int("shards", &f->shards,
            "parameter-server shard processes (jobs with mode: PS; default "
            "the spec's ps.shards)",
            1, 64);
  flags.String("straggler", &f->straggler,
               "makes worker RANK FACTOR times slower (to study stragglers)",
               "RANK:FACTOR");
  flags.Int("min-step-ms", &f->min_step_ms,
            "every worker's forward and backward take at least this long "
            "(sleeping the rest): models workers on machines of their own "
            "when they share this machine's cores (default 0)",
            0, 3600000);
  flags.String("timeline", &f->timeline,
               "write each worker's Chrome trace of its steps' phases to "
               "FILE.w<i>.json (FILE without a .json ending)",
               "FILE");
  flags.Bool("timeline-layers", &f->timeline_layers,
             "with --timeline: also each layer's forward and backward call "
             "(CPU devices)");
  f->training.Register(flags, TrainingCommand::kLocal);
  AddSecurityFlags(flags, &f->security);
}

// The job's worker counts: the flags, else the spec's cluster section when
// it asks for more than one worker, else kLocalWorkers. Sets f->workers.
absl::Status LocalWorkerCounts(LocalFlags* f, ClusterSpec* cluster) {
  WorkerCountFlags counts = f->counts;
  if (!counts.any() && HasDefaultWorkerCounts(*cluster)) {
    counts.workers = kLocalWorkers;
  }
  RETURN_IF_ERROR(ApplyWorkerCounts(counts, cluster));
  f->workers = cluster->max_workers();
  return absl::OkStatus();
}

// The coordinator's options for the job `f` names, with its worker counts
// (f->workers: the processes to start). In PS mode f->shards becomes the
// spec's shard count (after --shards overrode it).
absl::StatusOr<CoordinatorOptions> LocalCoordinatorOptions(LocalFlags* f) {
  CoordinatorOptions o;
  ASSIGN_OR_RETURN(o.job, LoadJobSpec(f->job));
  if (!f->straggler.empty()) {
    RETURN_IF_ERROR(ParseStraggler(f->straggler).status());
  }
  if (f->shards > 0 && o.job.mode() != PS) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shards needs a job with `mode: PS`; ", f->job,
                     " trains with all-reduce"));
  }
  if (o.job.mode() == PS) {
    if (f->shards > 0) {
      o.job.mutable_ps()->set_shards(static_cast<int>(f->shards));
    }
    f->shards = o.job.ps().shards();
  }
  RETURN_IF_ERROR(LocalWorkerCounts(f, o.job.mutable_cluster()));
  o.listen = f->listen;
  o.security = f->security;
  if (!f->training.log_dir.empty()) {
    o.job.mutable_log()->set_dir(f->training.log_dir);
  }
  o.metrics_listen = f->training.metrics_listen;
  o.report_path = !f->training.report.empty()
                      ? f->training.report
                      : absl::StrCat("/tmp/cohort-local-", getpid(), ".json");
  return o;
}

// --report, --export and each worker's --timeline file, before anything
// starts: writable, and neither the job's spec, its data, --init-from, a
// checkpoint's name nor each other.
absl::Status CheckLocalOutputs(const LocalFlags& f, const JobSpec& job) {
  CommandInputs inputs;
  inputs.files.emplace_back("the --job file", f.job);
  if (!f.training.init_from.empty()) {
    inputs.files.emplace_back("the --init-from file", f.training.init_from);
  } else if (!job.init_from().empty()) {
    inputs.files.emplace_back("the spec's init_from file", job.init_from());
  }
  inputs.AddDataSet(job.data(), f.data_dir);
  const std::string& dir = !f.training.checkpoint_dir.empty()
                               ? f.training.checkpoint_dir
                               : job.checkpoint().dir();
  if (!dir.empty()) inputs.checkpoint_dirs.push_back(dir);
  std::vector<std::pair<std::string, std::string>> outputs =
      f.training.Outputs();
  for (int64_t i = 0; !f.timeline.empty() && i < f.workers; ++i) {
    outputs.emplace_back("--timeline", LocalTimelinePath(f.timeline, i));
  }
  if (f.timeline_layers && f.timeline.empty()) {
    return absl::InvalidArgumentError(
        "--timeline-layers adds to a timeline: give --timeline=FILE too");
  }
  for (const auto& [flag, path] : outputs) {
    RETURN_IF_ERROR(CheckOutputFlag(flag, path, inputs));
  }
  return CheckDistinctOutputs(outputs);
}

// Every worker (and, in PS mode, every shard) of the job runs on this
// machine, so the job as a whole must fit it: checked before anything
// starts, instead of each process finding out alone. Workers may hold
// different numbers of GPUs; the fewest is counted for all (a lower bound,
// like the estimate itself).
absl::Status CheckLocalMemory(const JobSpec& job,
                              const std::vector<Devices>& worker_devices,
                              int64_t shards) {
  ASSIGN_OR_RETURN(const ModelSizes sizes, InferJobModelSizes(job));
  WorkerMemoryOptions w;
  w.replicas = worker_devices[0].replicas();
  w.total_replicas = 0;
  for (const Devices& d : worker_devices) {
    w.replicas = std::min(w.replicas, d.replicas());
    w.total_replicas += d.replicas();
  }
  w.gpus = !worker_devices[0].gpus.empty();
  w.checkpoints = !job.checkpoint().dir().empty();
  const int workers = static_cast<int>(worker_devices.size());
  const std::string processes = absl::StrCat(
      workers, workers == 1 ? " worker" : " workers",
      shards > 0
          ? absl::StrCat(" and ", shards, shards == 1 ? " shard" : " shards")
          : "");
  MemoryEstimate all = Times(EstimateWorkerMemory(job, sizes, w), workers,
                             workers == 1 ? "worker" : "workers");
  if (shards > 0) {
    const MemoryEstimate shard = EstimateShardMemory(
        job, sizes.padded_parameters / shards, sizes.padded_parameters);
    for (const MemoryPart& p : Times(shard, static_cast<int>(shards),
                                     shards == 1 ? "shard" : "shards")
                                   .parts) {
      all.parts.push_back(p);
      all.total += p.bytes;
    }
  }
  absl::StatusOr<AvailableMemory> available = DetectAvailableMemory();
  if (!available.ok()) return absl::OkStatus();  // nothing to compare with
  return CheckMemoryFits(all, *available,
                         absl::StrCat("this job (", processes, ")"));
}

// Starts f.shards parameter-server shard processes for `coordinator`.
absl::Status StartShards(const char* self, const std::string& coordinator,
                         const LocalFlags& f, std::vector<Child>* children) {
  for (int64_t i = 0; i < f.shards; ++i) {
    Child c;
    c.name = absl::StrCat("shard process ", i);
    std::vector<std::string> a = {"ps",
                                  absl::StrCat("--coordinator=", coordinator),
                                  "--listen=127.0.0.1:0", "--quiet"};
    for (std::string& s : SecurityArgs(f.security)) a.push_back(std::move(s));
    ASSIGN_OR_RETURN(c.pid, Spawn(self, a));
    children->push_back(c);
  }
  return absl::OkStatus();
}

// The command line of worker process `i`, which trains on `devices`.
std::vector<std::string> WorkerArgs(const std::string& coordinator,
                                    const LocalFlags& f, int64_t i,
                                    const Devices& devices) {
  std::vector<std::string> a = {
      "worker", absl::StrCat("--coordinator=", coordinator),
      absl::StrCat("--devices=", devices.ToString()), "--quiet"};
  if (!f.data_dir.empty()) a.push_back(absl::StrCat("--data-dir=", f.data_dir));
  if (f.threads > 0) a.push_back(absl::StrCat("--threads=", f.threads));
  if (!f.straggler.empty()) {
    a.push_back(absl::StrCat("--straggler=", f.straggler));
  }
  if (f.min_step_ms > 0) {
    a.push_back(absl::StrCat("--min-step-ms=", f.min_step_ms));
  }
  if (!f.timeline.empty()) {
    a.push_back(absl::StrCat("--timeline=", LocalTimelinePath(f.timeline, i)));
    if (f.timeline_layers) a.push_back("--timeline-layers");
  }
  for (std::string& s : f.training.WorkerArgs()) a.push_back(std::move(s));
  for (std::string& s : SecurityArgs(f.security)) a.push_back(std::move(s));
  return a;
}

// Starts f.workers worker processes for `coordinator`, worker i on
// worker_devices[i].
absl::Status StartWorkers(const char* self, const std::string& coordinator,
                          const LocalFlags& f,
                          const std::vector<Devices>& worker_devices,
                          std::vector<Child>* children) {
  for (int64_t i = 0; i < f.workers; ++i) {
    Child c;
    c.name = absl::StrCat("worker process ", i);
    ASSIGN_OR_RETURN(
        c.pid, Spawn(self, WorkerArgs(coordinator, f, i, worker_devices[i])));
    children->push_back(c);
  }
  return absl::OkStatus();
}

// Shows progress until the job ends (`done`), a signal arrives, or a child
// failed and none is left; returns the first failure seen ("" if none).
std::string WatchJob(CoordinatorServer& coordinator,
                     const std::atomic<bool>& done,
                     std::vector<Child>& children, bool live, bool quiet) {
  std::string failure;
  absl::Time last_shown = absl::InfinitePast();
  while (!done.load()) {
    if (g_signal.load() != 0) {
      failure = absl::StrCat("interrupted by signal ", g_signal.load());
      break;
    }
    Reap(children, &failure);
    if (!failure.empty() && !AnyRunning(children)) break;
    if (!quiet && absl::Now() - last_shown >
                      (live ? absl::Milliseconds(200) : absl::Seconds(5))) {
      ShowProgress(coordinator.Status(), live);
      last_shown = absl::Now();
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return failure;
}

// Runs the job to its end, then stops every child and the coordinator;
// returns the first failure seen ("" if none).
std::string Supervise(CoordinatorServer& coordinator,
                      std::vector<Child>& children, bool quiet) {
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    coordinator.Wait();
    done.store(true);
  });
  const bool live = isatty(STDERR_FILENO) && !quiet;
  std::string failure = WatchJob(coordinator, done, children, live, quiet);
  if (live) std::fprintf(stderr, "\r\033[K");
  if (!done.load()) {
    // A signal, or every worker gone before the job ended.
    for (Child& c : children) {
      if (c.running) kill(c.pid, SIGTERM);
    }
  }
  StopChildren(children, &failure);
  coordinator.Shutdown();
  waiter.join();
  return failure;
}

// Prints the result of a job that succeeded with no child `failure`, or
// says why it did not; removes the report unless the user asked for it.
absl::Status Conclude(const CoordinatorServer& coordinator,
                      const std::string& report_path, bool keep_report,
                      const std::string& failure, int* exit_code) {
  const StatusResponse s = coordinator.Status();
  if (s.state() == SUCCEEDED && failure.empty()) {
    // A report that could not be written loses the result.
    RETURN_IF_ERROR(coordinator.report_status());
    PrintResult(report_path);
    if (!keep_report) unlink(report_path.c_str());
    *exit_code = 0;
    return absl::OkStatus();
  }
  if (!keep_report) unlink(report_path.c_str());
  std::string why = s.reason();
  if (!failure.empty())
    why = why.empty() ? failure : absl::StrCat(failure, "; ", why);
  return absl::AbortedError(
      absl::StrCat("job ", JobState_Name(s.state()), ": ", why));
}

}  // namespace

absl::Status RunLocal(const std::vector<std::string>& args, bool* help,
                      int* exit_code, const char* self_path) {
  LocalFlags f;
  FlagSet flags("local");
  AddLocalFlags(flags, &f);
  RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    *help = true;
    return absl::OkStatus();
  }
  if (f.job.empty())
    return absl::InvalidArgumentError("--job=FILE is required");
  RETURN_IF_ERROR(f.training.Check());
  ASSIGN_OR_RETURN(const Devices all_devices,
                   ResolveDevices(f.devices, f.replicas));
  ASSIGN_OR_RETURN(const CoordinatorOptions o, LocalCoordinatorOptions(&f));
  ASSIGN_OR_RETURN(const std::vector<Devices> worker_devices,
                   SplitDevices(all_devices, static_cast<int>(f.workers)));
  RETURN_IF_ERROR(CheckLocalOutputs(f, o.job));
  RETURN_IF_ERROR(CheckLocalMemory(o.job, worker_devices, f.shards));
  ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorServer> coordinator,
                   CoordinatorServer::Start(o));
  const std::string address = coordinator->address();
  std::fprintf(
      stderr, "cohort local: coordinator on %s, starting %lld workers%s%s\n",
      address.c_str(), static_cast<long long>(f.workers),
      f.shards > 0 ? absl::StrCat(" and ", f.shards, " shards").c_str() : "",
      o.job.cluster().min_workers() < f.workers
          ? absl::StrCat(" (the job starts with ",
                         o.job.cluster().min_workers(), " or more)")
                .c_str()
          : "");
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  std::vector<Child> children;
  RETURN_IF_ERROR(StartShards(self_path, address, f, &children));
  RETURN_IF_ERROR(
      StartWorkers(self_path, address, f, worker_devices, &children));
  const std::string failure =
      Supervise(*coordinator, children, f.training.quiet);
  return Conclude(*coordinator, o.report_path, !f.training.report.empty(),
                  failure, exit_code);
}

}  // namespace cohort

// Push + pull throughput of cohort's parameter-server path over loopback:
// for every shard count and model size, real shard servers (ShardServer,
// gRPC on 127.0.0.1:0) in this process and one PsClient (rank 0 of 1,
// consistency ASYNC, so no pull ever waits) time `steps` iterations of Push
// then Pull of one flat float tensor of that size.
//   ps_bandwidth [--sizes_mib=1,4,16,64,256] [--shards=1,2] [--steps=N]
//                [--warmup=1] [--repeats=3] [--partition_bytes=4M]
//                [--nocheck] [--nofork]
// Every row is measured `repeats` times, the shard counts of a size
// alternating so that the rows check (b) compares saw the same load on a
// shared machine, and the median run is reported. Each run has a child
// process of its own (--fork, the default), as a real worker and shard
// with one model size would, so that no run inherits another's heap. The
// process tunes malloc as the cohort binary does (common/malloc_tuning.h);
// without that, each step's megabyte buffers page-fault anew and a 1 MiB
// model moves at about a third of the speed. The parent never starts
// gRPC, so forking is safe.
// Prints a markdown table: push GB/s and pull GB/s over the time spent in
// each call, push+pull GB/s = 2 x size x steps / the whole loop's time.
// After each row's timed steps the pulled parameters are compared with
// init - lr x grad x steps (exact in float), so a path that moves bytes
// but loses updates fails. With --check (the default) it also checks that
//   (a) 64 MiB on 1 shard reaches >= 1.0 GB/s push+pull, and
//   (b) for every size >= 16 MiB measured on 1 and 2 shards, 2 are faster
//       (on machines of at least 4 cores; below, the ratio is printed as
//       INFO and not checked);
// prints PASS/FAIL per check and exits 1 on any failure (or any error).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/ps_client.h"
#include "common/malloc_tuning.h"
#include "common/partition.h"
#include "common/status_macros.h"
#include "proto/job.pb.h"
#include "server/ps/shard_server.h"

ABSL_FLAG(std::string, sizes_mib, "1,4,16,64,256",
          "model sizes in MiB, comma-separated");
ABSL_FLAG(std::string, shards, "1,2", "shard counts, comma-separated");
ABSL_FLAG(int, steps, 0,
          "timed push+pull steps per row; 0: enough to move ~1 GB, at least "
          "3");
ABSL_FLAG(int, warmup, 1, "untimed push+pull steps per row");
ABSL_FLAG(int, repeats, 3,
          "measurements of every row, alternating shard counts; the median "
          "is shown and checked");
ABSL_FLAG(bool, check, true,
          "check the throughput bounds (64 MiB on 1 shard >= 1 GB/s; 2 "
          "shards faster than 1 from 16 MiB) and exit 1 if one fails");
ABSL_FLAG(bool, fork, true,
          "measure each row in a child process of its own (else later rows "
          "inherit an allocator warmed by earlier ones)");
ABSL_FLAG(std::string, partition_bytes, "4M",
          "partition size in bytes (K, M, G suffixes), as PsSpec");

namespace cohort {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
// Every element's gradient is kGrad and the learning rate kLr, so after k
// steps a parameter is kInit - k * kLr * kGrad: a multiple of 1/1024 well
// within float's exact range for any step count this benchmark runs.
constexpr float kInit = 1.0f;
constexpr float kGrad = 1.0f;
constexpr double kLr = 1.0 / 1024;

struct Config {
  std::vector<int64_t> sizes_mib;
  std::vector<int> shards;
  int steps = 0;
  int warmup = 1;
  int repeats = 3;
  bool check = true;
  bool fork = true;
  int64_t partition_bytes = 4 * kMiB;
};

// One timed run; trivially copyable, as it comes back from a child
// process as bytes.
struct Row {
  int shards = 0;
  int64_t size_mib = 0;
  int partitions = 0;  // a shard without any has nothing to do
  int steps = 0;
  double seconds = 0;  // the timed loop, push and pull together
  double push_seconds = 0, pull_seconds = 0;

  double Bytes() const { return static_cast<double>(size_mib * kMiB) * steps; }
  double PushGBps() const { return Bytes() / push_seconds / 1e9; }
  double PullGBps() const { return Bytes() / pull_seconds / 1e9; }
  double TotalGBps() const { return 2 * Bytes() / seconds / 1e9; }
};

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// Steps that move about 1 GB (push + pull), at least 3.
int DefaultSteps(int64_t size_mib) {
  const double per_step = 2.0 * static_cast<double>(size_mib * kMiB);
  return std::max(3, static_cast<int>(1e9 / per_step + 0.999));
}

JobSpec BenchJob(int64_t partition_bytes) {
  JobSpec job;
  job.mutable_optimizer()->set_kind(OptimizerSpec::SGD);
  job.mutable_ps()->set_consistency(ASYNC);
  job.mutable_ps()->set_partition_bytes(partition_bytes);
  // 256 MiB over a busy 2-core loopback must not hit the 30 s default.
  job.mutable_ps()->set_rpc_timeout_ms(120000);
  return job;
}

// The shard servers and the client of one run, which owns them all.
// Destruction order matters: the client (its channels and threads) goes
// before the servers, which shut down explicitly so a run's sockets and
// memory are gone before the next. Thread-compatible.
class Cluster {
 public:
  static absl::StatusOr<std::unique_ptr<Cluster>> Start(const Config& config,
                                                        int num_shards,
                                                        int64_t count);
  ~Cluster() {
    client_.reset();
    for (auto& server : servers_) server->Shutdown();
  }
  PsClient& client() { return *client_; }
  int partitions() const { return partitions_; }

 private:
  Cluster() = default;
  std::vector<std::unique_ptr<ShardServer>> servers_;
  std::unique_ptr<PsClient> client_;
  int partitions_ = 0;
};

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Start(const Config& config,
                                                        int num_shards,
                                                        int64_t count) {
  std::unique_ptr<Cluster> c(new Cluster());
  const JobSpec job = BenchJob(config.partition_bytes);
  PsClientOptions options;
  for (int i = 0; i < num_shards; ++i) {
    ShardServerOptions so;
    so.job = job;
    so.shard_index = i;
    ASSIGN_OR_RETURN(std::unique_ptr<ShardServer> server,
                     ShardServer::Start(so));
    options.shard_addresses.push_back(server->address());
    c->servers_.push_back(std::move(server));
  }
  ASSIGN_OR_RETURN(options.partitions,
                   PlanPartitions({count}, num_shards, config.partition_bytes));
  c->partitions_ = static_cast<int>(options.partitions.size());
  options.worker_id = "bench-worker";
  options.rank = 0;
  options.rpc_timeout = absl::Milliseconds(job.ps().rpc_timeout_ms());
  ASSIGN_OR_RETURN(c->client_, PsClient::Create(options));
  return c;
}

// `s` with "step N: " in front of its message.
absl::Status AtStep(const absl::Status& s, int64_t step) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("step ", step, ": ", s.message()));
}

// Push then pull of step `step` (ASYNC: the clock is the step and its data
// chunk, one replica), adding each call's seconds.
absl::Status Step(PsClient& client, int64_t step, const float* grads,
                  float* params, double* push_seconds, double* pull_seconds) {
  PsPush push;
  push.clock = step;
  push.lr = kLr;
  push.weight = 1;
  push.first_chunk = step;
  auto start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(AtStep(client.Push(grads, push), step));
  *push_seconds += SecondsSince(start);
  start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(AtStep(client.Pull(step + 1, params), step));
  *pull_seconds += SecondsSince(start);
  return absl::OkStatus();
}

// INTERNAL naming the first wrong element and how many are wrong when the
// parameters after `steps` updates are not what SGD gives.
absl::Status CheckParams(const std::vector<float>& params, int64_t steps) {
  const float want = static_cast<float>(kInit - steps * kLr * kGrad);
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(params.size()); ++i) {
    if (params[i] != want) {
      if (wrong++ == 0) first = i;
    }
  }
  if (wrong == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("after ", steps, " updates ", wrong, " of ", params.size(),
                   " parameters are wrong; element ", first, " is ",
                   params[first], ", not ", want));
}

absl::StatusOr<Row> MeasureRow(const Config& config, int num_shards,
                               int64_t size_mib) {
  const int64_t count = size_mib * kMiB / 4;
  Row row;
  row.shards = num_shards;
  row.size_mib = size_mib;
  row.steps = config.steps > 0 ? config.steps : DefaultSteps(size_mib);
  ASSIGN_OR_RETURN(std::unique_ptr<Cluster> cluster,
                   Cluster::Start(config, num_shards, count));
  row.partitions = cluster->partitions();
  PsClient& client = cluster->client();
  std::vector<float> params(count, kInit), grads(count, kGrad);
  RETURN_IF_ERROR(client.Init(params.data(), /*world_size=*/1,
                              /*total_replicas=*/1));
  double unused_push = 0, unused_pull = 0;
  int64_t step = 0;
  for (; step < config.warmup; ++step) {
    RETURN_IF_ERROR(Step(client, step, grads.data(), params.data(),
                         &unused_push, &unused_pull));
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < row.steps; ++i, ++step) {
    RETURN_IF_ERROR(Step(client, step, grads.data(), params.data(),
                         &row.push_seconds, &row.pull_seconds));
  }
  row.seconds = SecondsSince(start);
  RETURN_IF_ERROR(CheckParams(params, step));
  return row;
}

// Sends MeasureRow's result to the parent through `fd`: the Row's bytes,
// or the error's text. The exit status says which.
[[noreturn]] void ChildMain(const Config& config, int num_shards,
                            int64_t size_mib, int fd) {
  int code = 1;
  std::string out;
  {
    absl::StatusOr<Row> row = MeasureRow(config, num_shards, size_mib);
    if (row.ok()) {
      out.assign(reinterpret_cast<const char*>(&*row), sizeof(Row));
      code = 0;
    } else {
      out = row.status().ToString();
    }
  }  // the servers shut down before the result goes out
  for (size_t done = 0; done < out.size();) {
    const ssize_t n = write(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(1);
    done += static_cast<size_t>(n);
  }
  // _exit: no static destructors while gRPC's threads may still run.
  _exit(code);
}

// Everything `fd` gives until end of file (or an error).
std::string ReadAll(int fd) {
  std::string in;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return in;
    in.append(buf, static_cast<size_t>(n));
  }
}

// MeasureRow in a child process, which takes the row's servers, threads
// and memory with it when it exits.
absl::StatusOr<Row> MeasureRowInChild(const Config& config, int num_shards,
                                      int64_t size_mib) {
  static_assert(std::is_trivially_copyable<Row>::value, "Row goes by bytes");
  int fds[2];
  if (pipe(fds) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  std::fflush(stdout);  // or the child would print the buffer again
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(error)));
  }
  if (pid == 0) {
    close(fds[0]);
    ChildMain(config, num_shards, size_mib, fds[1]);
  }
  close(fds[1]);
  const std::string in = ReadAll(fds[0]);
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
      in.size() == sizeof(Row)) {
    Row row;
    std::memcpy(&row, in.data(), sizeof(Row));
    return row;
  }
  if (!in.empty() && WIFEXITED(status)) return absl::InternalError(in);
  return absl::InternalError(absl::StrCat(
      "child process ", pid, " died (",
      WIFSIGNALED(status) ? absl::StrCat("signal ", WTERMSIG(status))
                          : absl::StrCat("exit status ", WEXITSTATUS(status)),
      ") without a result"));
}

// The repetition with the median push+pull time; `all` lists every
// repetition's push+pull GB/s, in the order measured.
Row Median(std::vector<Row> reps, std::string* all) {
  all->clear();
  for (const Row& r : reps) {
    absl::StrAppend(all, all->empty() ? "" : " ",
                    absl::StrFormat("%.2f", r.TotalGBps()));
  }
  std::sort(reps.begin(), reps.end(),
            [](const Row& a, const Row& b) { return a.seconds < b.seconds; });
  return reps[reps.size() / 2];
}

void PrintRow(const Row& r, const std::string& all) {
  std::printf(
      "| %6d | %8lld | %10d | %5d | %7.3f | %9.3f | %9.3f | %14.3f | %s |\n",
      r.shards, static_cast<long long>(r.size_mib), r.partitions, r.steps,
      r.seconds, r.PushGBps(), r.PullGBps(), r.TotalGBps(), all.c_str());
  std::fflush(stdout);
}

// Every size's rows, printed as they are done. Within a size the shard
// counts alternate, `repeats` times, so that the rows check (b) compares
// saw the same load on a shared machine; the median repetition is kept.
absl::StatusOr<std::vector<Row>> MeasureAll(const Config& config) {
  std::vector<Row> rows;
  for (int64_t size_mib : config.sizes_mib) {
    std::vector<std::vector<Row>> reps(config.shards.size());
    for (int r = 0; r < config.repeats; ++r) {
      for (size_t i = 0; i < config.shards.size(); ++i) {
        const int shards = config.shards[i];
        absl::StatusOr<Row> row =
            config.fork ? MeasureRowInChild(config, shards, size_mib)
                        : MeasureRow(config, shards, size_mib);
        if (!row.ok()) {
          return absl::Status(row.status().code(),
                              absl::StrCat(shards, " shard(s), ", size_mib,
                                           " MiB: ", row.status().message()));
        }
        reps[i].push_back(*row);
      }
    }
    for (std::vector<Row>& r : reps) {
      std::string all;
      rows.push_back(Median(std::move(r), &all));
      PrintRow(rows.back(), all);
    }
  }
  return rows;
}

// Check (b) needs a core for each of the client's two shard streams and
// each of the two shards.
constexpr int kCoresForB = 4;

// The checks of --check over the measured rows; false if any failed.
bool RunChecks(const std::vector<Row>& rows) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const bool enough_cores = cores >= kCoresForB;
  std::map<std::pair<int, int64_t>, const Row*> by_key;
  for (const Row& r : rows) by_key[{r.shards, r.size_mib}] = &r;
  bool ok = true;
  std::printf("\n");
  auto one = by_key.find({1, 64});
  if (one == by_key.end()) {
    std::printf("SKIP (a) 64 MiB on 1 shard >= 1.0 GB/s: not measured\n");
  } else {
    const double gbps = one->second->TotalGBps();
    const bool pass = gbps >= 1.0;
    ok &= pass;
    std::printf("%s (a) 64 MiB on 1 shard: %.3f GB/s push+pull (need >= 1.0)\n",
                pass ? "PASS" : "FAIL", gbps);
  }
  bool any = false;
  for (const Row& r : rows) {
    if (r.shards != 1 || r.size_mib < 16) continue;
    auto two = by_key.find({2, r.size_mib});
    if (two == by_key.end()) continue;
    any = true;
    const double ratio = two->second->TotalGBps() / r.TotalGBps();
    const bool pass = ratio > 1.0;
    // Each shard and each of the client's shard streams keeps a core busy;
    // with fewer cores a second shard only shares the same ones, and the
    // ratio is noise around 1 (measured on 2 cores: 0.96-1.08).
    const char* verdict = !enough_cores ? "INFO" : pass ? "PASS" : "FAIL";
    if (enough_cores) ok &= pass;
    std::printf(
        "%s (b) %lld MiB: 2 shards %.3f GB/s vs 1 shard %.3f GB/s, ratio "
        "%.3f (need > 1%s)\n",
        verdict, static_cast<long long>(r.size_mib), two->second->TotalGBps(),
        r.TotalGBps(), ratio,
        enough_cores ? ""
                     : absl::StrCat("; not checked: ", cores,
                                    " cores, the check needs ", kCoresForB)
                           .c_str());
  }
  if (!any) {
    std::printf(
        "SKIP (b) 2 shards faster than 1: no size >= 16 MiB "
        "measured with both\n");
  }
  return ok;
}

bool ParseBytes(std::string text, int64_t* bytes) {
  int64_t unit = 1;
  if (!text.empty()) {
    char suffix = static_cast<char>(toupper(text.back()));
    if (suffix == 'K' || suffix == 'M' || suffix == 'G') {
      unit = suffix == 'K' ? 1 << 10 : suffix == 'M' ? 1 << 20 : 1 << 30;
      text.pop_back();
    }
  }
  int64_t value;
  if (!absl::SimpleAtoi(text, &value) || value < 1) return false;
  *bytes = value * unit;
  return *bytes >= 4 && *bytes % 4 == 0;
}

// Positive integers from "a,b,c", each at most `max`.
template <typename Int>
bool ParseList(const std::string& text, Int max, std::vector<Int>* out) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    Int value;
    if (!absl::SimpleAtoi(part, &value) || value < 1 || value > max) {
      return false;
    }
    out->push_back(value);
  }
  return !out->empty();
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  Config config;
  config.steps = absl::GetFlag(FLAGS_steps);
  config.warmup = absl::GetFlag(FLAGS_warmup);
  config.repeats = absl::GetFlag(FLAGS_repeats);
  config.check = absl::GetFlag(FLAGS_check);
  config.fork = absl::GetFlag(FLAGS_fork);
  if (!ParseList<int64_t>(absl::GetFlag(FLAGS_sizes_mib), 4096,
                          &config.sizes_mib) ||
      !ParseList<int>(absl::GetFlag(FLAGS_shards), 64, &config.shards) ||
      !ParseBytes(absl::GetFlag(FLAGS_partition_bytes),
                  &config.partition_bytes) ||
      config.steps < 0 || config.warmup < 0 || config.repeats < 1) {
    std::fprintf(
        stderr,
        "ps_bandwidth: need --sizes_mib like 1,4,16 (1..4096), "
        "--shards like 1,2 (1..64), --partition_bytes a multiple "
        "of 4 such as 4M, --steps >= 0, --warmup >= 0, --repeats >= 1\n");
    return 2;
  }
  std::printf(
      "# parameter-server push+pull over loopback, 1 worker, ASYNC, SGD, "
      "partitions of %lld bytes, %d warm-up step(s), %s, median of %d\n\n"
      "| shards | size MiB | partitions | steps | seconds | push GB/s | pull "
      "GB/s | "
      "push+pull GB/s | all runs GB/s |\n"
      "|-------:|---------:|-----------:|------:|--------:|----------:|--------"
      "--:|"
      "---------------:|:--------------|\n",
      static_cast<long long>(config.partition_bytes), config.warmup,
      config.fork ? "each run in a fresh process" : "all runs in one process",
      config.repeats);
  absl::StatusOr<std::vector<Row>> rows = MeasureAll(config);
  if (!rows.ok()) {
    std::fprintf(stderr, "ps_bandwidth: %s\n",
                 rows.status().ToString().c_str());
    return 1;
  }
  if (!config.check) return 0;
  return RunChecks(*rows) ? 0 : 1;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  // As the cohort binary does for its workers and shards.
  cohort::KeepLargeBuffersResident();
  return cohort::Main(argc, argv);
}

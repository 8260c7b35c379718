// All-reduce bandwidth over loopback, nccl-tests style, for raw Gloo and for
// cohort's path (Communicator + BucketReducer with 25 MiB buckets, scaling to
// the mean as training does), measured alternately in the same run.
//   allreduce [--procs=P] [--min=4K] [--max=256M] [--iters=N]
//             [--algorithm=ring_chunked]
// Forks P processes that rendezvous through a Gloo FileStore in a temporary
// directory (setup only). Raw Gloo runs the same algorithm class cohort uses,
// constructed once per size. Every iteration is preceded by a barrier and
// followed by a check of every element; the time of an iteration is the
// slowest rank's, and the table shows medians. busbw = algbw * 2(P-1)/P.
// "ratio" is cohort's busbw over raw Gloo's: the median over iterations of
// the ratio within each back-to-back pair. Exits 1 on any wrong element or
// failed collective.
//   --bucket=25M  BucketReducer bucket size
//   --mean        cohort scales to the mean (1/P), one more pass over memory
//   --warmup=2    untimed iterations per size and path
// Across hosts (bench/allreduce_netns.sh runs it so, one rank per network
// namespace): --rank=R runs rank R alone instead of forking, rendezvousing
// through the FileStore in --store=DIR (a directory every rank can read,
// e.g. on a shared file system), and listening and advertising on --host.
//   --rank=-1     this process's rank; -1 forks all --procs ranks
//   --store=DIR   the rendezvous directory (required with --rank)
//   --host=ADDR   the address peers reach this rank at (default 127.0.0.1)
//   --wait=auto   how cohort's synchronous lanes wait: auto, spin or block
//                 (GlooOptions::Wait; ranks in other namespaces count as
//                 other hosts, so auto spins there)
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "gloo/allreduce_bcube.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/barrier_all_to_all.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"
#include "worker/comm/bucket_reducer.h"
#include "worker/comm/communicator.h"

ABSL_FLAG(int, procs, 2, "number of processes (ranks)");
ABSL_FLAG(std::string, min, "4K", "smallest size in bytes (K, M, G suffixes)");
ABSL_FLAG(std::string, max, "256M", "largest size in bytes (x4 steps)");
ABSL_FLAG(int, iters, 20, "timed iterations per size and path");
ABSL_FLAG(int, warmup, 2, "untimed iterations per size and path");
ABSL_FLAG(std::string, bucket, "25M", "BucketReducer bucket size in bytes");
ABSL_FLAG(bool, mean, false,
          "cohort path scales to the mean (1/P) instead of returning the sum");
ABSL_FLAG(int, rank, -1, "run this rank alone (with --store); -1 forks all");
ABSL_FLAG(std::string, store, "",
          "rendezvous directory shared by all ranks (with --rank)");
ABSL_FLAG(std::string, host, "127.0.0.1",
          "address this rank listens on and advertises to its peers");
ABSL_FLAG(std::string, wait, "auto",
          "cohort's synchronous lanes: auto, spin or block");
ABSL_FLAG(std::string, algorithm, cohort::GlooOptions().algorithm,
          "ring, ring_chunked, halving_doubling or bcube");

namespace cohort {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

struct Config {
  int procs;
  int64_t min_bytes;
  int64_t max_bytes;
  int64_t bucket_bytes;
  int iters;
  int warmup;
  std::string algorithm;
  bool mean;
  std::string dir;
  std::string host;
  GlooOptions::Wait wait = GlooOptions::Wait::kAuto;
};

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
  return *bytes >= 4;
}

std::unique_ptr<gloo::Algorithm> MakeRaw(
    const std::string& name, const std::shared_ptr<gloo::Context>& context,
    float* data, int count,
    const gloo::ReductionFunction<float>* fn =
        gloo::ReductionFunction<float>::sum) {
  std::vector<float*> ptrs = {data};
  if (name == "ring") {
    return std::make_unique<gloo::AllreduceRing<float>>(context, ptrs, count,
                                                        fn);
  }
  if (name == "halving_doubling") {
    return std::make_unique<gloo::AllreduceHalvingDoubling<float>>(
        context, ptrs, count, fn);
  }
  if (name == "bcube") {
    return std::make_unique<gloo::AllreduceBcube<float>>(context, ptrs, count,
                                                         fn);
  }
  return std::make_unique<gloo::AllreduceRingChunked<float>>(context, ptrs,
                                                             count, fn);
}

// Small integers, so that sums are exact in any order.
void Fill(float* data, int64_t count, int rank) {
  for (int64_t i = 0, m = 0; i < count; ++i, m = m == 6 ? 0 : m + 1) {
    data[i] = static_cast<float>(rank + 1 + m);
  }
}

int64_t CountWrong(const float* data, int64_t count, int procs, float scale) {
  int64_t wrong = 0;
  const float base = static_cast<float>(procs * (procs + 1) / 2);
  for (int64_t i = 0, m = 0; i < count; ++i, m = m == 6 ? 0 : m + 1) {
    wrong += data[i] != (base + static_cast<float>(procs * m)) * scale;
  }
  return wrong;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// One rank's view of the whole run.
class Rank {
 public:
  Rank(const Config& config, int rank) : config_(config), rank_(rank) {}
  int Run();

 private:
  bool Connect();
  double TimeRaw(gloo::Algorithm* op, float* data, int64_t count,
                 int64_t* wrong);
  double TimeCohort(BucketReducer* reducer, float* data, int64_t count,
                    int64_t* wrong, bool* failed);
  // Element-wise max (times) or sum (counts) over ranks, in place.
  void Combine(std::vector<float>* values, bool max);
  void PrintRow(int64_t bytes, const std::vector<double>& raw,
                const std::vector<double>& cohort, int64_t raw_wrong,
                int64_t cohort_wrong);

  const Config config_;
  const int rank_;
  std::shared_ptr<gloo::rendezvous::Context> raw_;
  // Barriers and result exchange run on connections of their own, so that
  // neither measured path inherits their socket state.
  std::shared_ptr<gloo::rendezvous::Context> control_;
  std::unique_ptr<gloo::BarrierAllToAll> barrier_;
  std::unique_ptr<Communicator> comm_;
  std::vector<double> ratios_;  // cohort / raw busbw, sizes >= 1 MiB
};

bool Rank::Connect() {
  gloo::rendezvous::FileStore files(config_.dir);
  gloo::rendezvous::PrefixStore raw_store("raw", files);
  gloo::rendezvous::PrefixStore control_store("control", files);
  gloo::rendezvous::PrefixStore cohort_store("cohort", files);
  try {
    auto device = gloo::transport::tcp::CreateDevice(config_.host.c_str());
    raw_ = std::make_shared<gloo::rendezvous::Context>(rank_, config_.procs);
    raw_->setTimeout(std::chrono::seconds(120));
    raw_->connectFullMesh(raw_store, device);
    auto control_device =
        gloo::transport::tcp::CreateDevice(config_.host.c_str());
    control_ =
        std::make_shared<gloo::rendezvous::Context>(rank_, config_.procs);
    control_->setTimeout(std::chrono::seconds(120));
    control_->connectFullMesh(control_store, control_device);
    barrier_ = std::make_unique<gloo::BarrierAllToAll>(control_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: raw Gloo setup failed: %s\n", rank_,
                 e.what());
    return false;
  }
  GlooOptions options;
  options.algorithm = config_.algorithm;
  options.hostname = config_.host;
  options.wait = config_.wait;
  options.timeout = absl::Seconds(120);
  auto comm =
      CreateGlooCommunicator(cohort_store, rank_, config_.procs, options);
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank_,
                 comm.status().ToString().c_str());
    return false;
  }
  comm_ = std::move(comm).value();
  return true;
}

double Rank::TimeRaw(gloo::Algorithm* op, float* data, int64_t count,
                     int64_t* wrong) {
  Fill(data, count, rank_);
  barrier_->run();
  auto start = std::chrono::steady_clock::now();
  op->run();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  *wrong += CountWrong(data, count, config_.procs, 1.0f);
  return seconds;
}

double Rank::TimeCohort(BucketReducer* reducer, float* data, int64_t count,
                        int64_t* wrong, bool* failed) {
  const float scale = config_.mean ? 1.0f / config_.procs : 1.0f;
  Fill(data, count, rank_);
  barrier_->run();
  auto start = std::chrono::steady_clock::now();
  reducer->BeginStep(data, count, scale);
  reducer->MarkReadyFrom(0);
  absl::Status status = reducer->Finish();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!status.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank_, status.ToString().c_str());
    *failed = true;
  }
  *wrong += CountWrong(data, count, config_.procs, scale);
  return seconds;
}

void Rank::Combine(std::vector<float>* values, bool max) {
  auto op = MakeRaw("ring", control_, values->data(),
                    static_cast<int>(values->size()),
                    max ? gloo::ReductionFunction<float>::max
                        : gloo::ReductionFunction<float>::sum);
  op->run();
}

void Rank::PrintRow(int64_t bytes, const std::vector<double>& raw,
                    const std::vector<double>& cohort, int64_t raw_wrong,
                    int64_t cohort_wrong) {
  const double factor = 2.0 * (config_.procs - 1) / config_.procs;
  double raw_time = Median(raw), cohort_time = Median(cohort);
  double raw_algbw = bytes / raw_time / 1e9;
  double cohort_algbw = bytes / cohort_time / 1e9;
  // Raw and cohort iterations alternate, so each pair saw the same machine
  // load; the median of the pairs' ratios is steadier than a ratio of
  // medians on a shared machine.
  std::vector<double> pair_ratios;
  for (size_t i = 0; i < raw.size(); ++i) {
    pair_ratios.push_back(raw[i] / cohort[i]);
  }
  double ratio = Median(pair_ratios);
  if (bytes >= kMiB) ratios_.push_back(ratio);
  std::printf(
      "%12lld %11lld %9.0f %7.3f %7.3f %7lld   %9.0f %7.3f %7.3f %7lld   "
      "%5.3f\n",
      static_cast<long long>(bytes), static_cast<long long>(bytes / 4),
      raw_time * 1e6, raw_algbw, raw_algbw * factor,
      static_cast<long long>(raw_wrong), cohort_time * 1e6, cohort_algbw,
      cohort_algbw * factor, static_cast<long long>(cohort_wrong), ratio);
  std::fflush(stdout);
}

int Rank::Run() {
  if (!Connect()) return 1;
  const int64_t max_count = config_.max_bytes / 4;
  std::vector<float> raw_data(max_count), cohort_data(max_count);
  BucketReducer reducer(comm_.get(), config_.bucket_bytes);
  if (rank_ == 0) {
    std::printf(
        "# %d processes via %s, algorithm %s, median of %d "
        "iterations\n"
        "#                     ------------ raw gloo -------------   "
        "-- cohort (Communicator + BucketReducer) --\n"
        "#       size       count      time   algbw   busbw  #wrong        "
        "time   algbw   busbw  #wrong   ratio\n"
        "#        (B)  (elements)      (us)  (GB/s)  (GB/s)                "
        "(us)  (GB/s)  (GB/s)         (busbw)\n",
        config_.procs,
        config_.host == "127.0.0.1" ? "loopback" : config_.host.c_str(),
        config_.algorithm.c_str(), config_.iters);
  }
  bool failed = false;
  int64_t total_wrong = 0;
  for (int64_t bytes = config_.min_bytes; bytes <= config_.max_bytes;
       bytes *= 4) {
    const int64_t count = bytes / 4;
    auto raw_op = MakeRaw(config_.algorithm, raw_, raw_data.data(),
                          static_cast<int>(count));
    std::vector<float> times;  // raw then cohort, per timed iteration
    std::vector<float> wrong(2, 0);
    for (int it = 0; it < config_.warmup + config_.iters; ++it) {
      int64_t raw_wrong = 0, cohort_wrong = 0;
      double raw_time =
          TimeRaw(raw_op.get(), raw_data.data(), count, &raw_wrong);
      double cohort_time = TimeCohort(&reducer, cohort_data.data(), count,
                                      &cohort_wrong, &failed);
      wrong[0] += raw_wrong;
      wrong[1] += cohort_wrong;
      if (it < config_.warmup) continue;
      times.push_back(static_cast<float>(raw_time));
      times.push_back(static_cast<float>(cohort_time));
    }
    Combine(&times, /*max=*/true);
    Combine(&wrong, /*max=*/false);
    total_wrong += static_cast<int64_t>(wrong[0] + wrong[1]);
    if (rank_ != 0) continue;
    std::vector<double> raw, cohort;
    for (size_t i = 0; i < times.size(); i += 2) {
      raw.push_back(times[i]);
      cohort.push_back(times[i + 1]);
    }
    PrintRow(bytes, raw, cohort, static_cast<int64_t>(wrong[0]),
             static_cast<int64_t>(wrong[1]));
  }
  if (rank_ == 0 && !ratios_.empty()) {
    double log_sum = 0;
    for (double r : ratios_) log_sum += std::log(r);
    std::printf(
        "# cohort/raw busbw from 1 MiB up: geometric mean %.3f, min %.3f "
        "(%zu sizes)\n",
        std::exp(log_sum / ratios_.size()),
        *std::min_element(ratios_.begin(), ratios_.end()), ratios_.size());
  }
  if (rank_ == 0 && total_wrong > 0) {
    std::printf("# FAILED: %lld wrong elements\n",
                static_cast<long long>(total_wrong));
  }
  std::fflush(stdout);
  return failed || total_wrong > 0 ? 1 : 0;
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  Config config;
  config.procs = absl::GetFlag(FLAGS_procs);
  config.iters = absl::GetFlag(FLAGS_iters);
  config.warmup = absl::GetFlag(FLAGS_warmup);
  config.algorithm = absl::GetFlag(FLAGS_algorithm);
  config.mean = absl::GetFlag(FLAGS_mean);
  if (!ParseBytes(absl::GetFlag(FLAGS_min), &config.min_bytes) ||
      !ParseBytes(absl::GetFlag(FLAGS_max), &config.max_bytes) ||
      !ParseBytes(absl::GetFlag(FLAGS_bucket), &config.bucket_bytes) ||
      config.min_bytes > config.max_bytes ||
      config.max_bytes > (int64_t{1} << 33)) {
    std::fprintf(stderr,
                 "allreduce: --min and --max must be sizes of at least 4 "
                 "bytes such as 4K or 256M, min <= max <= 8G\n");
    return 2;
  }
  if (config.procs < 1 || config.procs > 64 || config.iters < 1 ||
      config.warmup < 0) {
    std::fprintf(stderr,
                 "allreduce: need 1 <= --procs <= 64, --iters >= 1, "
                 "--warmup >= 0\n");
    return 2;
  }
  config.host = absl::GetFlag(FLAGS_host);
  const std::string wait = absl::GetFlag(FLAGS_wait);
  if (wait == "spin") {
    config.wait = GlooOptions::Wait::kSpin;
  } else if (wait == "block") {
    config.wait = GlooOptions::Wait::kBlock;
  } else if (wait != "auto") {
    std::fprintf(stderr, "allreduce: --wait must be auto, spin or block\n");
    return 2;
  }
  const int only_rank = absl::GetFlag(FLAGS_rank);
  if (only_rank >= 0) {
    config.dir = absl::GetFlag(FLAGS_store);
    if (only_rank >= config.procs || config.dir.empty()) {
      std::fprintf(stderr,
                   "allreduce: --rank needs 0 <= rank < --procs and a "
                   "--store directory shared by all ranks\n");
      return 2;
    }
    Rank process(config, only_rank);
    return process.Run();
  }
  char pattern[] = "/tmp/cohort_allreduce_XXXXXX";
  if (mkdtemp(pattern) == nullptr) {
    std::perror("allreduce: mkdtemp");
    return 1;
  }
  config.dir = pattern;
  std::vector<pid_t> pids;
  for (int rank = 0; rank < config.procs; ++rank) {
    pid_t pid = fork();
    if (pid == 0) {
      int code;
      {
        // Destroyed before _exit, so that the communicator says goodbye.
        Rank process(config, rank);
        code = process.Run();
      }
      _exit(code);
    }
    pids.push_back(pid);
  }
  int failures = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    failures += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::string cleanup = "rm -rf '" + config.dir + "'";
  if (std::system(cleanup.c_str()) != 0) {
    std::fprintf(stderr, "allreduce: could not remove %s\n",
                 config.dir.c_str());
  }
  if (failures > 0) {
    std::fprintf(stderr, "allreduce: %d of %d processes failed\n", failures,
                 config.procs);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) { return cohort::Main(argc, argv); }

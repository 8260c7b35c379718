// `cohort status`, `cohort metrics`, `cohort stop`: operator queries.
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "cli/cluster_commands.h"
#include "cli/flags.h"
#include "client/coordinator_client.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"

namespace cohort {
namespace {

struct QueryFlags {
  std::string coordinator;
  bool json = false;
  bool watch = false;
  int64_t interval_s = 2;
  int64_t timeout_s = 10;
  std::string reason = "stopped by cohort stop";
  SecurityOptions security;
};

// Parses the flags every query shares; false when only help was asked for.
absl::StatusOr<bool> ParseQuery(const std::string& command,
                                const std::vector<std::string>& args,
                                QueryFlags* f, bool* help) {
  FlagSet flags(command);
  flags.String("coordinator", &f->coordinator,
               "the coordinator's HOST:PORT; required", "HOST:PORT");
  flags.Int("timeout", &f->timeout_s, "seconds to wait for an answer", 1, 3600);
  if (command == "stop") {
    flags.String("reason", &f->reason, "why (shown in status and the report)",
                 "TEXT");
  } else {
    flags.Bool("json", &f->json, "print JSON instead of a table");
  }
  if (command == "status") {
    flags.Bool("watch", &f->watch,
               "redraw the view every --interval seconds until the job ends");
    flags.Int("interval", &f->interval_s, "seconds between redraws (--watch)",
              1, 3600);
  }
  AddSecurityFlags(flags, &f->security);
  RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    *help = true;
    return false;
  }
  if (f->coordinator.empty()) {
    return absl::InvalidArgumentError("--coordinator=HOST:PORT is required");
  }
  return true;
}

absl::Status PrintJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.always_print_primitive_fields = true;
  auto s = google::protobuf::util::MessageToJsonString(m, &out, o);
  if (!s.ok()) return absl::InternalError(std::string(s.message()));
  std::fputs(out.c_str(), stdout);
  return absl::OkStatus();
}

void PrintWorkers(const google::protobuf::RepeatedPtrField<WorkerStatus>& ws) {
  std::printf("%-4s %-24s %-20s %-8s %-8s %-10s %-12s %-10s %-10s\n", "RANK",
              "ADDRESS", "HOST", "PID", "HB AGE", "STEP", "SAMPLES/S", "LOSS",
              "LR");
  for (const WorkerStatus& w : ws) {
    std::printf(
        "%-4d %-24s %-20s %-8d %-8s %-10lld %-12.0f %-10.4f %-10.4g%s\n",
        w.rank(), w.address().c_str(), w.host().c_str(), w.pid(),
        absl::StrFormat("%.1fs", w.heartbeat_age_s()).c_str(),
        static_cast<long long>(w.progress().step()),
        w.progress().samples_per_s(), w.progress().loss(), w.progress().lr(),
        w.finished() ? " (finished)" : "");
  }
}

// The newest evaluation a worker reported (the lowest rank's: every rank
// evaluates the same model) and the samples skipped, under the table.
void PrintLastEvaluation(
    const google::protobuf::RepeatedPtrField<WorkerStatus>& ws) {
  int64_t skipped = 0;
  const WorkerStatus* newest = nullptr;
  for (const WorkerStatus& w : ws) {
    skipped += w.progress().skipped_samples();
    if (w.progress().finished_epoch_test_metrics_size() == 0) continue;
    if (newest == nullptr ||
        w.progress().finished_epoch() > newest->progress().finished_epoch()) {
      newest = &w;
    }
  }
  if (newest != nullptr) {
    std::string line;
    for (const Metric& m : newest->progress().finished_epoch_test_metrics()) {
      absl::StrAppend(&line, line.empty() ? "" : " | ", m.name(), " ",
                      absl::StrFormat("%.4g", m.value()));
    }
    std::printf("\nepoch %lld evaluation: %s\n",
                static_cast<long long>(newest->progress().finished_epoch()),
                line.c_str());
  }
  if (skipped > 0) {
    std::printf("samples skipped as unreadable (skip_bad_samples): %lld\n",
                static_cast<long long>(skipped));
  }
}

// "0:12 1:3 >=8:1": the non-empty buckets of a staleness histogram.
std::string Histogram(const ShardStats& st) {
  std::string out;
  const int n = st.staleness_histogram_size();
  for (int k = 0; k < n; ++k) {
    if (st.staleness_histogram(k) == 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : " ",
                    k + 1 == n ? absl::StrCat(">=", k) : absl::StrCat(k), ":",
                    st.staleness_histogram(k));
  }
  return out.empty() ? "-" : out;
}

// Rows moved per push as text: "-" before the first push.
std::string PerPush(int64_t rows, int64_t pushes) {
  return pushes > 0 ? absl::StrFormat("%.1f", static_cast<double>(rows) /
                                                  static_cast<double>(pushes))
                    : std::string("-");
}

// The shards' sparse tables (EmbeddingBagSpec.sparse), when the job has
// any: rows each shard stores, and rows moved per push (a worker's step
// pushes the rows its batches touched and pulled).
void PrintShardRows(const google::protobuf::RepeatedPtrField<ShardStatus>& ss) {
  const bool any = std::any_of(ss.begin(), ss.end(), [](const ShardStatus& s) {
    const ShardStats& st = s.stats();
    return st.rows_held() > 0 || st.rows_pushed() > 0 || st.rows_pulled() > 0;
  });
  if (!any) return;
  std::printf("\n%-5s %-12s %-17s %s\n", "SHARD", "ROWS HELD",
              "ROWS PUSHED/PUSH", "ROWS PULLED/PUSH");
  for (const ShardStatus& s : ss) {
    const ShardStats& st = s.stats();
    std::printf("%-5d %-12lld %-17s %s\n", s.index(),
                static_cast<long long>(st.rows_held()),
                PerPush(st.rows_pushed(), st.pushes()).c_str(),
                PerPush(st.rows_pulled(), st.pushes()).c_str());
  }
}

void PrintShards(const google::protobuf::RepeatedPtrField<ShardStatus>& ss) {
  if (ss.empty()) return;
  std::printf("\n%-5s %-22s %-8s %-6s %-10s %-9s %-9s %-8s %s\n", "SHARD",
              "ADDRESS", "HB AGE", "PARTS", "PARAMS", "PUSH/S", "PULL/S",
              "VERSION", "STALENESS (clocks:pushes)");
  for (const ShardStatus& s : ss) {
    std::printf("%-5d %-22s %-8s %-6d %-10lld %-9.1f %-9.1f %-8lld %s\n",
                s.index(), s.address().c_str(),
                absl::StrFormat("%.1fs", s.heartbeat_age_s()).c_str(),
                s.partitions(), static_cast<long long>(s.parameters()),
                s.stats().pushes_per_s(), s.stats().pulls_per_s(),
                static_cast<long long>(s.stats().version()),
                Histogram(s.stats()).c_str());
  }
  PrintShardRows(ss);
}

// The generations after the first: why each was opened and how long the
// job took to get going again.
void PrintGenerations(const StatusResponse& s) {
  if (s.generations_size() <= 1) return;
  std::printf("\nrestarts: %d\n%-4s %-6s %-10s %-10s %-11s %s\n", s.restarts(),
              "GEN", "WORLD", "RESTORED", "FORMED IN", "TRAINING IN", "CAUSE");
  for (const GenerationRecord& g : s.generations()) {
    if (g.generation() <= 1) continue;
    auto since = [&g](double t) {
      return t > 0 && g.regroup_started_unix_s() > 0
                 ? absl::StrFormat("%.1fs", t - g.regroup_started_unix_s())
                 : std::string("-");
    };
    std::printf("%-4llu %-6d %-10lld %-10s %-11s %s\n",
                static_cast<unsigned long long>(g.generation()), g.world_size(),
                static_cast<long long>(g.restored_step()),
                since(g.formed_unix_s()).c_str(),
                since(g.first_step_unix_s()).c_str(), g.cause().c_str());
  }
}

}  // namespace

namespace {

void PrintStatus(const StatusResponse& s) {
  std::printf(
      "job %s: %s%s\n", s.job_name().c_str(), JobState_Name(s.state()).c_str(),
      s.reason().empty() ? "" : absl::StrCat(" (", s.reason(), ")").c_str());
  std::printf(
      "generation %llu | epoch %lld | step %lld | world size %d | up %.0fs\n",
      static_cast<unsigned long long>(s.generation()),
      static_cast<long long>(s.epoch()), static_cast<long long>(s.step()),
      s.world_size(), s.uptime_s());
  if (s.regrouping()) {
    std::printf("regrouping: %s\n", s.regroup_reason().c_str());
  }
  PrintWorkers(s.workers());
  PrintLastEvaluation(s.workers());
  for (const std::string& line : s.stragglers()) {
    std::printf("straggler: %s\n", line.c_str());
  }
  if (s.refused_workers() > 0) {
    std::printf("refused workers: %lld (the last: %s)\n",
                static_cast<long long>(s.refused_workers()),
                s.last_refusal().c_str());
  }
  PrintShards(s.shards());
  PrintGenerations(s);
}

// `cohort status --watch`: the same view, redrawn in place on a terminal
// (appended, with a separator line, when stdout is a pipe or a file) until
// the job ends or the coordinator goes away.
absl::Status WatchStatus(CoordinatorClient& client, const QueryFlags& f) {
  const bool tty = isatty(STDOUT_FILENO);
  bool seen = false;
  JobState last = FORMING;
  const absl::Time first_try = absl::Now();
  while (true) {
    absl::StatusOr<StatusResponse> s =
        client.GetStatus(absl::Seconds(f.timeout_s));
    if (!s.ok()) {
      // A coordinator still starting gets --timeout seconds to answer.
      if (!seen && absl::Now() < first_try + absl::Seconds(f.timeout_s)) {
        absl::SleepFor(absl::Milliseconds(200));
        continue;
      }
      if (!seen) return s.status();
      // A coordinator whose job ended exits once everyone knows.
      std::printf("the coordinator at %s no longer answers: %s\n",
                  f.coordinator.c_str(),
                  std::string(s.status().message()).c_str());
      return last == SUCCEEDED || last == STOPPED
                 ? absl::OkStatus()
                 : absl::UnavailableError(
                       absl::StrCat("lost the coordinator at ", f.coordinator));
    }
    seen = true;
    last = s->state();
    std::fputs(tty ? "\x1b[H\x1b[2J" : "----\n", stdout);
    PrintStatus(*s);
    const bool ended = s->state() == SUCCEEDED || s->state() == FAILED ||
                       s->state() == STOPPED;
    std::printf("\n%s (every %llds; Ctrl-C to quit)\n",
                ended ? "the job has ended" : "watching",
                static_cast<long long>(f.interval_s));
    std::fflush(stdout);
    if (ended) {
      return s->state() == FAILED
                 ? absl::AbortedError(absl::StrCat("job FAILED: ", s->reason()))
                 : absl::OkStatus();
    }
    absl::SleepFor(absl::Seconds(f.interval_s));
  }
}

}  // namespace

absl::Status RunStatus(const std::vector<std::string>& args, bool* help) {
  QueryFlags f;
  ASSIGN_OR_RETURN(bool go, ParseQuery("status", args, &f, help));
  if (!go) return absl::OkStatus();
  ASSIGN_OR_RETURN(auto client,
                   CoordinatorClient::Create(f.coordinator, f.security));
  if (f.watch && f.json) {
    return absl::InvalidArgumentError(
        "--watch redraws a table; for scripts, poll --json instead");
  }
  if (f.watch) return WatchStatus(*client, f);
  ASSIGN_OR_RETURN(StatusResponse s,
                   client->GetStatus(absl::Seconds(f.timeout_s)));
  if (f.json) return PrintJson(s);
  PrintStatus(s);
  return absl::OkStatus();
}

absl::Status RunMetrics(const std::vector<std::string>& args, bool* help) {
  QueryFlags f;
  ASSIGN_OR_RETURN(bool go, ParseQuery("metrics", args, &f, help));
  if (!go) return absl::OkStatus();
  ASSIGN_OR_RETURN(auto client,
                   CoordinatorClient::Create(f.coordinator, f.security));
  ASSIGN_OR_RETURN(MetricsResponse m,
                   client->GetMetrics(absl::Seconds(f.timeout_s)));
  if (f.json) return PrintJson(m);
  std::printf("job samples/s %.0f\n", m.samples_per_s());
  std::printf("%-4s %-20s %-10s %-10s %-10s %-10s %-12s %-14s %-10s\n", "RANK",
              "HOST", "DATA ms", "COMPUTE ms", "COMM ms", "OPTIM ms",
              "SAMPLES/S", "ALLREDUCED MB", "BUSBW GB/s");
  for (const WorkerStatus& w : m.workers()) {
    const WorkerProgress& p = w.progress();
    std::printf(
        "%-4d %-20s %-10.2f %-10.2f %-10.2f %-10.2f %-12.0f %-14.1f "
        "%-10.2f\n",
        w.rank(), w.host().c_str(), 1e3 * p.times().data_s(),
        1e3 * p.times().compute_s(), 1e3 * p.times().comm_wait_s(),
        1e3 * p.times().optimizer_s(), p.samples_per_s(),
        p.bytes_allreduced() / 1e6, p.busbw_gbps());
  }
  PrintShards(m.shards());
  return absl::OkStatus();
}

absl::Status RunStop(const std::vector<std::string>& args, bool* help) {
  QueryFlags f;
  ASSIGN_OR_RETURN(bool go, ParseQuery("stop", args, &f, help));
  if (!go) return absl::OkStatus();
  ASSIGN_OR_RETURN(auto client,
                   CoordinatorClient::Create(f.coordinator, f.security));
  RETURN_IF_ERROR(client->Stop(f.reason, absl::Seconds(f.timeout_s)));
  std::printf("stop requested\n");
  return absl::OkStatus();
}

}  // namespace cohort

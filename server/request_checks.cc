#include "server/request_checks.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/net_address.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view rule,
                     absl::string_view got) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, " must be ", rule, ", got ", got));
}

// Non-empty text of at most `max_bytes` (worker ids, hosts, KV keys).
absl::Status CheckName(absl::string_view field, const std::string& value,
                       int max_bytes) {
  if (value.empty()) return Invalid(field, "non-empty", "\"\"");
  if (value.size() > static_cast<size_t>(max_bytes)) {
    return Invalid(field, absl::StrCat("at most ", max_bytes, " bytes"),
                   absl::StrCat(value.size(), " bytes"));
  }
  return absl::OkStatus();
}

// A host name or address literal, bracketed or not: what a resolver takes.
absl::Status CheckHostText(absl::string_view field, const std::string& value) {
  RETURN_IF_ERROR(CheckName(field, value, kMaxIdBytes));
  const std::string bare = StripBrackets(value);
  const bool ok =
      !bare.empty() && std::all_of(bare.begin(), bare.end(), [](char c) {
        return absl::ascii_isalnum(c) || c == '.' || c == '-' || c == ':' ||
               c == '_' || c == '%';
      });
  if (!ok) {
    return Invalid(field, "a host name or an IP address",
                   QuoteForMessage(value));
  }
  return absl::OkStatus();
}

absl::Status CheckLength(absl::string_view field, const std::string& value,
                         int64_t max_bytes) {
  if (static_cast<int64_t>(value.size()) <= max_bytes) return absl::OkStatus();
  return Invalid(field, absl::StrCat("at most ", max_bytes, " bytes"),
                 absl::StrCat(value.size(), " bytes"));
}

absl::Status NonNegative(absl::string_view field, int64_t v) {
  return v >= 0 ? absl::OkStatus() : Invalid(field, ">= 0", absl::StrCat(v));
}

absl::Status FiniteNonNegative(absl::string_view field, double v) {
  if (std::isfinite(v) && v >= 0) return absl::OkStatus();
  return Invalid(field, "finite and >= 0", absl::StrCat(v));
}

// A diverged run legitimately reports a NaN or infinite loss; only a
// negative one is nonsense (both losses cohort offers are >= 0).
absl::Status Loss(absl::string_view field, double v) {
  if (!(v < 0)) return absl::OkStatus();
  return Invalid(field, ">= 0 (or NaN/inf for a diverged run)",
                 absl::StrCat(v));
}

// -1 is the engine's "not evaluated".
absl::Status Accuracy(absl::string_view field, double v) {
  if (v == -1 || (v >= 0 && v <= 1)) return absl::OkStatus();
  return Invalid(field, "-1 (not evaluated) or in [0, 1]", absl::StrCat(v));
}

// A list of evaluation metrics: a few, short names. Values may be any
// double (a diverged model's MSE is infinite; reports write it as null).
absl::Status CheckMetrics(const std::string& field,
                          const google::protobuf::RepeatedPtrField<Metric>& m) {
  constexpr int kMaxMetrics = 32;
  if (m.size() > kMaxMetrics) {
    return Invalid(field, absl::StrCat("at most ", kMaxMetrics, " entries"),
                   absl::StrCat(m.size()));
  }
  for (int i = 0; i < m.size(); ++i) {
    RETURN_IF_ERROR(
        CheckName(absl::StrCat(field, "[", i, "].name"), m[i].name(), 64));
  }
  return absl::OkStatus();
}

absl::Status CheckTimes(const StepTimes& t) {
  RETURN_IF_ERROR(FiniteNonNegative("progress.times.data_s", t.data_s()));
  RETURN_IF_ERROR(FiniteNonNegative("progress.times.compute_s", t.compute_s()));
  RETURN_IF_ERROR(
      FiniteNonNegative("progress.times.comm_wait_s", t.comm_wait_s()));
  return FiniteNonNegative("progress.times.optimizer_s", t.optimizer_s());
}

absl::Status CheckProgress(const WorkerProgress& p) {
  RETURN_IF_ERROR(NonNegative("HeartbeatRequest.progress.step", p.step()));
  RETURN_IF_ERROR(NonNegative("HeartbeatRequest.progress.epoch", p.epoch()));
  RETURN_IF_ERROR(FiniteNonNegative("HeartbeatRequest.progress.samples_per_s",
                                    p.samples_per_s()));
  RETURN_IF_ERROR(FiniteNonNegative("HeartbeatRequest.progress.lr", p.lr()));
  RETURN_IF_ERROR(CheckLength("HeartbeatRequest.progress.best_metric_name",
                              p.best_metric_name(), 64));
  RETURN_IF_ERROR(Loss("HeartbeatRequest.progress.loss", p.loss()));
  absl::Status times = CheckTimes(p.times());
  if (!times.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("HeartbeatRequest.", times.message()));
  }
  RETURN_IF_ERROR(NonNegative("HeartbeatRequest.progress.bytes_allreduced",
                              p.bytes_allreduced()));
  RETURN_IF_ERROR(NonNegative("HeartbeatRequest.progress.skipped_samples",
                              p.skipped_samples()));
  RETURN_IF_ERROR(
      CheckMetrics("HeartbeatRequest.progress.finished_epoch_test_metrics",
                   p.finished_epoch_test_metrics()));
  return FiniteNonNegative("HeartbeatRequest.progress.busbw_gbps",
                           p.busbw_gbps());
}

constexpr int kMaxEpochResults = 100000;

absl::Status CheckResult(const WorkerResult& r) {
  RETURN_IF_ERROR(NonNegative("FinishRequest.result.steps", r.steps()));
  RETURN_IF_ERROR(NonNegative("FinishRequest.result.epochs", r.epochs()));
  RETURN_IF_ERROR(NonNegative("FinishRequest.result.samples", r.samples()));
  RETURN_IF_ERROR(FiniteNonNegative("FinishRequest.result.train_seconds",
                                    r.train_seconds()));
  RETURN_IF_ERROR(FiniteNonNegative("FinishRequest.result.samples_per_s",
                                    r.samples_per_s()));
  RETURN_IF_ERROR(Loss("FinishRequest.result.final_loss", r.final_loss()));
  RETURN_IF_ERROR(
      Accuracy("FinishRequest.result.test_accuracy", r.test_accuracy()));
  if (r.test_loss() != -1) {
    RETURN_IF_ERROR(Loss("FinishRequest.result.test_loss", r.test_loss()));
  }
  RETURN_IF_ERROR(
      NonNegative("FinishRequest.result.parameters", r.parameters()));
  RETURN_IF_ERROR(
      NonNegative("FinishRequest.result.skipped_samples", r.skipped_samples()));
  RETURN_IF_ERROR(
      CheckMetrics("FinishRequest.result.test_metrics", r.test_metrics()));
  // The best evaluation goes into the report as given.
  RETURN_IF_ERROR(CheckLength("FinishRequest.result.best_metric_name",
                              r.best_metric_name(), 64));
  if (r.has_final_lr() && !(std::isfinite(r.final_lr()) && r.final_lr() >= 0)) {
    return Invalid("FinishRequest.result.final_lr", "finite and >= 0",
                   absl::StrCat(r.final_lr()));
  }
  if (r.best_step() < -1) {
    return Invalid("FinishRequest.result.best_step", ">= -1 (-1: none)",
                   absl::StrCat(r.best_step()));
  }
  if (r.epoch_results_size() > kMaxEpochResults) {
    return Invalid("FinishRequest.result.epoch_results",
                   absl::StrCat("at most ", kMaxEpochResults, " entries"),
                   absl::StrCat(r.epoch_results_size()));
  }
  for (int i = 0; i < r.epoch_results_size(); ++i) {
    const EpochSummary& e = r.epoch_results(i);
    const std::string f =
        absl::StrCat("FinishRequest.result.epoch_results[", i, "].");
    RETURN_IF_ERROR(Accuracy(f + "test_accuracy", e.test_accuracy()));
    RETURN_IF_ERROR(CheckMetrics(f + "test_metrics", e.test_metrics()));
    RETURN_IF_ERROR(FiniteNonNegative(f + "seconds", e.seconds()));
    RETURN_IF_ERROR(FiniteNonNegative(f + "wall_seconds", e.wall_seconds()));
  }
  return CheckLength("FinishRequest.result.model", r.model(), kMaxIdBytes);
}

absl::Status CheckKey(absl::string_view field, const std::string& key) {
  return CheckName(field, key, kMaxKeyBytes);
}

absl::Status PositiveCluster(absl::string_view field, int64_t v) {
  if (v > 0) return absl::OkStatus();
  return Invalid(absl::StrCat("job.cluster.", field), "> 0", absl::StrCat(v));
}

}  // namespace

absl::Status CheckClusterSpec(const ClusterSpec& c) {
  RETURN_IF_ERROR(PositiveCluster("min_workers", c.min_workers()));
  if (c.max_workers() < c.min_workers() || c.max_workers() > 4096) {
    return Invalid(
        "job.cluster.max_workers",
        absl::StrCat("in [min_workers (", c.min_workers(), "), 4096]"),
        absl::StrCat(c.max_workers()));
  }
  RETURN_IF_ERROR(PositiveCluster("last_call_ms", c.last_call_ms()));
  RETURN_IF_ERROR(PositiveCluster("join_timeout_ms", c.join_timeout_ms()));
  RETURN_IF_ERROR(
      PositiveCluster("heartbeat_interval_ms", c.heartbeat_interval_ms()));
  RETURN_IF_ERROR(PositiveCluster("heartbeat_misses", c.heartbeat_misses()));
  RETURN_IF_ERROR(PositiveCluster("bucket_bytes", c.bucket_bytes()));
  RETURN_IF_ERROR(
      PositiveCluster("collective_timeout_ms", c.collective_timeout_ms()));
  return PositiveCluster("coordinator_grace_ms", c.coordinator_grace_ms());
}

absl::Status CheckJoinRequest(const JoinRequest& r) {
  if (r.protocol_version() != Protocol::CURRENT) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the worker speaks coordinator protocol version ", r.protocol_version(),
        " but this coordinator speaks version ",
        static_cast<int>(Protocol::CURRENT),
        "; run the same cohort release on every node"));
  }
  RETURN_IF_ERROR(
      CheckName("JoinRequest.worker_id", r.worker_id(), kMaxIdBytes));
  RETURN_IF_ERROR(CheckName("JoinRequest.host", r.host(), kMaxIdBytes));
  RETURN_IF_ERROR(CheckHostText("JoinRequest.address", r.address()));
  RETURN_IF_ERROR(NonNegative("JoinRequest.pid", r.pid()));
  if (r.replicas() < 1 || r.replicas() > kMaxReplicas) {
    return Invalid("JoinRequest.replicas",
                   absl::StrCat("in [1, ", kMaxReplicas, "]"),
                   absl::StrCat(r.replicas()));
  }
  return absl::OkStatus();
}

absl::Status CheckHeartbeatRequest(const HeartbeatRequest& r) {
  RETURN_IF_ERROR(
      CheckName("HeartbeatRequest.worker_id", r.worker_id(), kMaxIdBytes));
  RETURN_IF_ERROR(NonNegative("HeartbeatRequest.rank", r.rank()));
  return CheckProgress(r.progress());
}

absl::Status CheckKvSetRequest(const KvSetRequest& r) {
  RETURN_IF_ERROR(CheckKey("KvSetRequest.key", r.key()));
  return CheckLength("KvSetRequest.value", r.value(), kMaxValueBytes);
}

absl::Status CheckKvGetRequest(const KvGetRequest& r) {
  return CheckKey("KvGetRequest.key", r.key());
}

absl::Status CheckKvWaitRequest(const KvWaitRequest& r) {
  if (r.keys_size() > kMaxWaitKeys) {
    return Invalid("KvWaitRequest.keys",
                   absl::StrCat("at most ", kMaxWaitKeys, " keys"),
                   absl::StrCat(r.keys_size(), " keys"));
  }
  for (int i = 0; i < r.keys_size(); ++i) {
    RETURN_IF_ERROR(
        CheckKey(absl::StrCat("KvWaitRequest.keys[", i, "]"), r.keys(i)));
  }
  if (r.timeout_ms() < 0 || r.timeout_ms() > kMaxWaitTimeoutMs) {
    return Invalid("KvWaitRequest.timeout_ms",
                   absl::StrCat("in [0, ", kMaxWaitTimeoutMs, "]"),
                   absl::StrCat(r.timeout_ms()));
  }
  return absl::OkStatus();
}

absl::Status CheckKvAddRequest(const KvAddRequest& r) {
  return CheckKey("KvAddRequest.key", r.key());
}

absl::Status CheckBeginEpochRequest(const BeginEpochRequest& r) {
  RETURN_IF_ERROR(NonNegative("BeginEpochRequest.rank", r.rank()));
  return NonNegative("BeginEpochRequest.epoch", r.epoch());
}

absl::Status CheckFinishRequest(const FinishRequest& r) {
  RETURN_IF_ERROR(
      CheckName("FinishRequest.worker_id", r.worker_id(), kMaxIdBytes));
  RETURN_IF_ERROR(NonNegative("FinishRequest.rank", r.rank()));
  RETURN_IF_ERROR(CheckLength("FinishRequest.error", r.error(), kMaxTextBytes));
  return CheckResult(r.result());
}

absl::Status CheckStopRequest(const StopRequest& r) {
  return CheckLength("StopRequest.reason", r.reason(), kMaxTextBytes);
}

absl::Status CheckRegisterShardRequest(const RegisterShardRequest& r) {
  if (r.protocol_version() != Protocol::CURRENT) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the shard speaks coordinator protocol version ", r.protocol_version(),
        " but this coordinator speaks version ",
        static_cast<int>(Protocol::CURRENT),
        "; run the same cohort release on every node"));
  }
  RETURN_IF_ERROR(
      CheckName("RegisterShardRequest.shard_id", r.shard_id(), kMaxIdBytes));
  RETURN_IF_ERROR(
      CheckName("RegisterShardRequest.host", r.host(), kMaxIdBytes));
  RETURN_IF_ERROR(NonNegative("RegisterShardRequest.pid", r.pid()));
  RETURN_IF_ERROR(
      CheckName("RegisterShardRequest.address", r.address(), kMaxIdBytes));
  const size_t colon = r.address().rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(r.address().substr(colon + 1), &port) || port < 1 ||
      port > 65535) {
    return Invalid("RegisterShardRequest.address",
                   "HOST:PORT with a port in "
                   "[1, 65535]",
                   QuoteForMessage(r.address()));
  }
  const std::string host = r.address().substr(0, colon);
  if (host.find(':') != std::string::npos &&
      (host.front() != '[' || host.back() != ']')) {
    return Invalid("RegisterShardRequest.address",
                   "HOST:PORT with an IPv6 host in brackets",
                   QuoteForMessage(r.address()));
  }
  RETURN_IF_ERROR(CheckHostText("RegisterShardRequest.address", host));
  return absl::OkStatus();
}

absl::Status CheckShardHeartbeatRequest(const ShardHeartbeatRequest& r) {
  RETURN_IF_ERROR(
      CheckName("ShardHeartbeatRequest.shard_id", r.shard_id(), kMaxIdBytes));
  RETURN_IF_ERROR(
      NonNegative("ShardHeartbeatRequest.shard_index", r.shard_index()));
  const ShardStats& s = r.stats();
  for (const auto& [name, v] :
       {std::pair<const char*, int64_t>{"pushes", s.pushes()},
        {"pulls", s.pulls()},
        {"duplicate_pushes", s.duplicate_pushes()},
        {"bytes_pushed", s.bytes_pushed()},
        {"bytes_pulled", s.bytes_pulled()},
        {"version", s.version()},
        {"min_clock", s.min_clock()}}) {
    RETURN_IF_ERROR(
        NonNegative(absl::StrCat("ShardHeartbeatRequest.stats.", name), v));
  }
  if (s.staleness_histogram_size() > 64) {
    return Invalid("ShardHeartbeatRequest.stats.staleness_histogram",
                   "at most 64 buckets",
                   absl::StrCat(s.staleness_histogram_size()));
  }
  return absl::OkStatus();
}

absl::Status CheckPlanPartitionsRequest(const PlanPartitionsRequest& r) {
  RETURN_IF_ERROR(NonNegative("PlanPartitionsRequest.rank", r.rank()));
  if (r.param_sizes_size() < 1 || r.param_sizes_size() > kMaxParamTensors) {
    return Invalid("PlanPartitionsRequest.param_sizes",
                   absl::StrCat("1 to ", kMaxParamTensors, " sizes"),
                   absl::StrCat(r.param_sizes_size()));
  }
  int64_t total = 0;
  for (int i = 0; i < r.param_sizes_size(); ++i) {
    const int64_t n = r.param_sizes(i);
    if (n < 1 || n > kMaxParamElements - total) {
      return Invalid(absl::StrCat("PlanPartitionsRequest.param_sizes[", i, "]"),
                     absl::StrCat(">= 1, with at most ", kMaxParamElements,
                                  " elements in all"),
                     absl::StrCat(n));
    }
    total += n;
  }
  return absl::OkStatus();
}

absl::Status CheckRank(absl::string_view field, int32_t rank, int world_size) {
  if (rank >= 0 && rank < world_size) return absl::OkStatus();
  return Invalid(field, absl::StrCat("in [0, ", world_size, ") (world size)"),
                 absl::StrCat(rank));
}

absl::Status StaleGeneration(uint64_t got, uint64_t current) {
  if (current == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "generation ", got, " does not exist: the job is still forming"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("stale generation ", got, ", current is ", current));
}

absl::Status CheckAdvertisedAddress(absl::string_view what,
                                    absl::string_view address,
                                    absl::string_view grpc_peer) {
  const std::string from = HostOfGrpcPeer(grpc_peer);
  if (!IsLoopbackHost(address) || from.empty() || IsLoopbackHost(from)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      what, " at ", from, " advertises the loopback address ",
      StripBrackets(address),
      ", which its peers on other hosts cannot reach; start it with "
      "--host=ADDRESS (an address of that machine the others can dial), or "
      "leave --host out to advertise the address it reaches the coordinator "
      "from"));
}

std::string QuoteForMessage(absl::string_view s) {
  constexpr size_t kMax = 64;
  std::string out =
      absl::StrCat("\"", absl::CHexEscape(s.substr(0, kMax)), "\"");
  if (s.size() > kMax) absl::StrAppend(&out, "... (", s.size(), " bytes)");
  return out;
}

}  // namespace cohort

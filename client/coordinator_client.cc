#include "client/coordinator_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "client/busy_refusal.h"
#include "client/keepalive.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

// Short enough to notice a dead coordinator quickly, long enough for a busy
// one; KvWait carries its own, longer deadline.
constexpr absl::Duration kRpcTimeout = absl::Seconds(10);

// The longest pause between two attempts of a retried call: short while
// the coordinator cannot be reached (a refused connection costs nothing,
// and a worker started first should join within a second of it
// listening), longer while it answers that it is busy.
constexpr absl::Duration kMaxBackoff = absl::Milliseconds(500);
constexpr absl::Duration kMaxBusyBackoff = absl::Seconds(2);

void SetDeadline(grpc::ClientContext* ctx, absl::Duration d) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(absl::ToInt64Milliseconds(d)));
}

absl::StatusCode ToAbsl(grpc::StatusCode c) {
  return static_cast<absl::StatusCode>(static_cast<int>(c));
}

bool ValidAddress(const std::string& a) {
  const size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  int port = 0;
  return absl::SimpleAtoi(a.substr(colon + 1), &port) && port > 0 &&
         port < 65536;
}

}  // namespace

CoordinatorClient::CoordinatorClient(std::string address,
                                     const SecurityOptions& security,
                                     std::shared_ptr<grpc::Channel> channel)
    : address_(std::move(address)),
      security_(security),
      channel_(std::move(channel)),
      stub_(Coordinator::NewStub(channel_)) {}

namespace {

grpc::ChannelArguments DataChannelArguments() {
  grpc::ChannelArguments args;
  // Reconnect promptly while Join retries: gRPC's default backoff grows to
  // two minutes.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 128 << 20);
  // A connection of its own, not one pooled with other channels to the
  // address: RenewFailedChannel's new channel must really connect anew.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  AddDataKeepalive(args);
  return args;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorClient>> CoordinatorClient::Create(
    const std::string& address, const SecurityOptions& security) {
  if (!ValidAddress(address)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "coordinator address must be HOST:PORT, got \"", address, "\""));
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      CreateChannel(address, security, DataChannelArguments());
  if (!channel.ok()) return channel.status();
  return std::unique_ptr<CoordinatorClient>(
      new CoordinatorClient(address, security, *std::move(channel)));
}

void CoordinatorClient::RenewFailedChannel() {
  // After a refused connection gRPC 1.51 leaves the channel failed until
  // the name is resolved again, seconds later, whatever its backoff says:
  // a worker started before its coordinator joined ~5 s after it began
  // listening. A fresh channel connects at once.
  const bool first_contact = generation_ == 0 && shard_id_.empty();
  if (!first_contact || channel_->GetState(/*try_to_connect=*/false) !=
                            GRPC_CHANNEL_TRANSIENT_FAILURE) {
    return;
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      CreateChannel(address_, security_, DataChannelArguments());
  if (!channel.ok()) return;  // the old one still reports why it failed
  channel_ = *std::move(channel);
  stub_ = Coordinator::NewStub(channel_);
}

absl::Status CoordinatorClient::FromGrpc(const grpc::Status& s,
                                         const char* what) const {
  if (s.ok()) return absl::OkStatus();
  const std::string hint = s.error_code() == grpc::StatusCode::UNAVAILABLE
                               ? TlsHint(security_, s.error_message())
                               : "";
  return absl::Status(ToAbsl(s.error_code()),
                      absl::StrCat(what, " at coordinator ", address_, ": ",
                                   s.error_message(), hint));
}

bool CoordinatorClient::ConnectingEndsBy(absl::Time deadline) {
  grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/true);
  while (state == GRPC_CHANNEL_IDLE || state == GRPC_CHANNEL_CONNECTING) {
    if (!channel_->WaitForStateChange(state, absl::ToChronoTime(deadline))) {
      return false;
    }
    state = channel_->GetState(/*try_to_connect=*/true);
  }
  // READY, or a failure the call will report with gRPC's reason.
  return true;
}

template <typename Call>
absl::Status CoordinatorClient::RetryWhileUnavailable(
    absl::Duration connect_timeout, const char* what, const Call& call,
    const std::function<bool()>& busy_refusal) {
  const absl::Time give_up = absl::Now() + connect_timeout;
  absl::Duration backoff = absl::Milliseconds(100);
  absl::BitGen random;
  int attempts = 0;
  while (true) {
    ++attempts;
    // A port that accepts connections but never answers (or a firewall
    // that drops them) would hold the call in gRPC's connect, up to its own
    // 20 s deadline, past --connect-timeout.
    if (!ConnectingEndsBy(give_up)) {
      return absl::UnavailableError(absl::StrCat(
          "cannot reach the coordinator at ", address_, " within ",
          absl::FormatDuration(connect_timeout),
          ": the connection never completed (a firewall drops the traffic, "
          "or what listens there is not a cohort coordinator)"));
    }
    grpc::Status s = call();
    if (s.ok()) return absl::OkStatus();
    // A partition that drops packets leaves the connection up: calls then
    // end at their deadline rather than with UNAVAILABLE.
    const bool unavailable =
        s.error_code() == grpc::StatusCode::UNAVAILABLE ||
        s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (unavailable && IsTlsHandshakeFailure(s.error_message())) {
      // A certificate nobody vouches for stays so: no point retrying.
      return absl::UnavailableError(absl::StrCat(
          "cannot reach the coordinator at ", address_, ": ", s.error_message(),
          TlsHint(security_, s.error_message())));
    }
    const bool busy = s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
                      busy_refusal && busy_refusal();
    const absl::Duration left = give_up - absl::Now();
    if ((!unavailable && !busy) || left <= absl::ZeroDuration()) {
      return GaveUp(s, what, attempts, connect_timeout, busy);
    }
    // Jittered, so that workers refused together do not come back together;
    // the last pause ends at the connect timeout, for a last attempt.
    absl::SleepFor(std::min(backoff * absl::Uniform(random, 0.5, 1.0), left));
    backoff = std::min(backoff * 2, busy ? kMaxBusyBackoff : kMaxBackoff);
  }
}

absl::Status CoordinatorClient::GaveUp(const grpc::Status& s, const char* what,
                                       int attempts,
                                       absl::Duration connect_timeout,
                                       bool busy) const {
  const absl::Status last = FromGrpc(s, what);
  if (busy) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, " at coordinator ", address_, ": still too busy after ", attempts,
        " attempts in ", absl::FormatDuration(connect_timeout),
        " (the connect timeout): ",
        absl::StripSuffix(s.error_message(), "; retry later")));
  }
  if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
      s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
    return last;
  }
  return absl::UnavailableError(absl::StrCat(
      "cannot reach the coordinator at ", address_, " after ", attempts,
      " attempts in ", absl::FormatDuration(connect_timeout), ": ",
      s.error_message(), TlsHint(security_, s.error_message())));
}

absl::StatusOr<JoinResponse> CoordinatorClient::Join(
    const JoinRequest& request, absl::Duration connect_timeout) {
  JoinResponse response;
  // A coordinator busy with other clients' blocking calls refuses a Join
  // before it looks at it, marked so (client/busy_refusal.h): retried like
  // UNAVAILABLE. A full job's RESOURCE_EXHAUSTED is not.
  bool busy = false;
  absl::Status s = RetryWhileUnavailable(
      connect_timeout, "join refused",
      [&] {
        RenewFailedChannel();
        grpc::ClientContext ctx;
        // The coordinator holds Join until the rendezvous round completes;
        // its own join timeout bounds that, so the deadline here only has
        // to outlast it.
        SetDeadline(&ctx, absl::Hours(1));
        const grpc::Status status = stub_->Join(&ctx, request, &response);
        busy = ctx.GetServerTrailingMetadata().count(kBusyRefusalKey) > 0;
        return status;
      },
      [&] { return busy; });
  if (absl::IsCancelled(s)) {
    // This client never cancels a Join; a coordinator that shuts down
    // (its job over) cancels the calls still waiting.
    return absl::AbortedError(absl::StrCat(
        "the coordinator at ", address_,
        " shut down while this worker waited to join: the job has ended "
        "(the coordinator's log and --report say how)"));
  }
  if (!s.ok()) return s;
  generation_ = response.generation();
  worker_id_ = request.worker_id();
  rank_ = response.rank();
  return response;
}

absl::StatusOr<RegisterShardResponse> CoordinatorClient::RegisterShard(
    const RegisterShardRequest& request, absl::Duration connect_timeout) {
  RegisterShardResponse response;
  absl::Status s =
      RetryWhileUnavailable(connect_timeout, "shard registration refused", [&] {
        RenewFailedChannel();
        grpc::ClientContext ctx;
        SetDeadline(&ctx, kRpcTimeout);
        return stub_->RegisterShard(&ctx, request, &response);
      });
  if (!s.ok()) return s;
  shard_id_ = request.shard_id();
  shard_index_ = response.shard_index();
  return response;
}

absl::StatusOr<ShardHeartbeatResponse> CoordinatorClient::ShardHeartbeat(
    const ShardStats& stats, const std::string& failure) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, heartbeat_deadline_);
  ctx.set_wait_for_ready(true);
  ShardHeartbeatRequest req;
  req.set_shard_id(shard_id_);
  req.set_shard_index(shard_index_);
  *req.mutable_stats() = stats;
  req.set_failure(failure);
  ShardHeartbeatResponse resp;
  absl::Status s = FromGrpc(HeartbeatStub()->ShardHeartbeat(&ctx, req, &resp),
                            "shard heartbeat");
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<PlanPartitionsResponse> CoordinatorClient::PlanPartitions(
    const std::vector<int64_t>& param_sizes) {
  PlanPartitionsRequest req;
  req.set_generation(generation_);
  req.set_rank(rank_);
  for (int64_t n : param_sizes) req.add_param_sizes(n);
  PlanPartitionsResponse resp;
  RETURN_IF_ERROR(RetryWhileUnavailable(retry_window_, "plan partitions", [&] {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, call_deadline_);
    return stub_->PlanPartitions(&ctx, req, &resp);
  }));
  return resp;
}

void CoordinatorClient::FollowHeartbeats(const ClusterSpec& cluster) {
  const absl::Duration interval =
      absl::Milliseconds(std::max<int64_t>(1, cluster.heartbeat_interval_ms()));
  heartbeat_deadline_ = HeartbeatDeadline(interval);
  // Two bounds, and at least 2 s: a call answered late by a loaded
  // coordinator must not fail the worker (KV calls are tried once).
  call_deadline_ = std::clamp(interval * cluster.heartbeat_misses() * 2,
                              absl::Seconds(2), absl::Seconds(10));
  absl::MutexLock lock(&heartbeat_mu_);
  if (heartbeat_stub_ != nullptr && heartbeat_interval_ == interval) return;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      CreateChannel(address_, security_, HeartbeatChannelArguments(interval));
  if (!channel.ok()) {
    // Create read the same files moments ago; heartbeats then share the
    // main connection.
    LOG(WARNING) << "heartbeats share the coordinator connection: "
                 << channel.status().message();
    return;
  }
  // Connected now, not at the first heartbeat.
  (*channel)->GetState(/*try_to_connect=*/true);
  heartbeat_interval_ = interval;
  heartbeat_stub_ = Coordinator::NewStub(*channel);
}

std::shared_ptr<Coordinator::Stub> CoordinatorClient::HeartbeatStub() {
  absl::MutexLock lock(&heartbeat_mu_);
  return heartbeat_stub_ != nullptr ? heartbeat_stub_ : stub_;
}

absl::StatusOr<HeartbeatResponse> CoordinatorClient::Heartbeat(
    const WorkerProgress& progress) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, heartbeat_deadline_);
  ctx.set_wait_for_ready(true);
  HeartbeatRequest req;
  req.set_generation(generation_);
  req.set_worker_id(worker_id_);
  req.set_rank(rank_);
  *req.mutable_progress() = progress;
  HeartbeatResponse resp;
  absl::Status s =
      FromGrpc(HeartbeatStub()->Heartbeat(&ctx, req, &resp), "heartbeat");
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<uint64_t> CoordinatorClient::BeginEpoch(int64_t epoch,
                                                       bool retry) {
  BeginEpochRequest req;
  req.set_generation(generation_);
  req.set_rank(rank_);
  req.set_epoch(epoch);
  BeginEpochResponse resp;
  // One attempt is for a caller that can do without the answer: it waits
  // no longer than a heartbeat.
  const absl::Duration window = retry ? retry_window_ : absl::ZeroDuration();
  RETURN_IF_ERROR(RetryWhileUnavailable(window, "begin epoch", [&] {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, retry ? call_deadline_ : heartbeat_deadline_);
    return stub_->BeginEpoch(&ctx, req, &resp);
  }));
  return resp.sampler_seed();
}

absl::Status CoordinatorClient::Finish(bool ok, const std::string& error,
                                       const WorkerResult& result) {
  FinishRequest req;
  req.set_generation(generation_);
  req.set_worker_id(worker_id_);
  req.set_rank(rank_);
  req.set_ok(ok);
  req.set_error(error);
  *req.mutable_result() = result;
  FinishResponse resp;
  return RetryWhileUnavailable(retry_window_, "finish", [&] {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, call_deadline_);
    return stub_->Finish(&ctx, req, &resp);
  });
}

absl::StatusOr<StatusResponse> CoordinatorClient::GetStatus(
    absl::Duration timeout) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout);
  StatusResponse resp;
  absl::Status s =
      FromGrpc(stub_->GetStatus(&ctx, StatusRequest(), &resp), "status");
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<MetricsResponse> CoordinatorClient::GetMetrics(
    absl::Duration timeout) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout);
  MetricsResponse resp;
  absl::Status s =
      FromGrpc(stub_->GetMetrics(&ctx, MetricsRequest(), &resp), "metrics");
  if (!s.ok()) return s;
  return resp;
}

absl::Status CoordinatorClient::Stop(const std::string& reason,
                                     absl::Duration timeout) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout);
  StopRequest req;
  req.set_reason(reason);
  StopResponse resp;
  return FromGrpc(stub_->Stop(&ctx, req, &resp), "stop");
}

absl::Status CoordinatorClient::Set(const std::string& key,
                                    const std::string& value) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, call_deadline_);
  KvSetRequest req;
  req.set_generation(generation_);
  req.set_key(key);
  req.set_value(value);
  KvSetResponse resp;
  return FromGrpc(stub_->KvSet(&ctx, req, &resp), "kv set");
}

absl::StatusOr<std::optional<std::string>> CoordinatorClient::Get(
    const std::string& key) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, call_deadline_);
  KvGetRequest req;
  req.set_generation(generation_);
  req.set_key(key);
  KvGetResponse resp;
  absl::Status s = FromGrpc(stub_->KvGet(&ctx, req, &resp), "kv get");
  if (!s.ok()) return s;
  if (!resp.found()) return std::optional<std::string>();
  return std::optional<std::string>(resp.value());
}

absl::Status CoordinatorClient::Wait(const std::vector<std::string>& keys,
                                     absl::Duration timeout) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout + call_deadline_);
  KvWaitRequest req;
  req.set_generation(generation_);
  for (const std::string& k : keys) req.add_keys(k);
  req.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  KvWaitResponse resp;
  return FromGrpc(stub_->KvWait(&ctx, req, &resp), "kv wait");
}

absl::StatusOr<int64_t> CoordinatorClient::Add(const std::string& key,
                                               int64_t delta) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, call_deadline_);
  KvAddRequest req;
  req.set_generation(generation_);
  req.set_key(key);
  req.set_delta(delta);
  KvAddResponse resp;
  absl::Status s = FromGrpc(stub_->KvAdd(&ctx, req, &resp), "kv add");
  if (!s.ok()) return s;
  return resp.value();
}

}  // namespace cohort

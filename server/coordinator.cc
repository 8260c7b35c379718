#include "server/coordinator.h"

#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/busy_refusal.h"
#include "client/keepalive.h"
#include "common/dir_lock.h"
#include "common/files.h"
#include "common/http_server.h"
#include "common/listen.h"
#include "common/logging.h"
#include "common/net_address.h"
#include "common/prometheus.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "proto/coordinator.grpc.pb.h"
#include "server/call_limiter.h"
#include "server/dashboard.h"
#include "server/gated_service.h"
#include "server/health_service.h"
#include "server/job_tracker.h"
#include "server/metrics_exporter.h"
#include "server/metrics_history.h"
#include "server/reflection_gate.h"
#include "server/request_checks.h"

namespace cohort {
namespace {

// absl and gRPC share the canonical status codes.
grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpc(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

HttpResponse Page(std::string content_type, std::string body) {
  HttpResponse r;
  r.content_type = std::move(content_type);
  r.body = std::move(body);
  return r;
}

// The status as JSON for the dashboard and scripts: proto field names,
// enums by name, zeros included (rank 0, step 0 are data, not absence).
HttpResponse StatusJson(const StatusResponse& status) {
  google::protobuf::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  o.preserve_proto_field_names = true;
  std::string json;
  const auto s = google::protobuf::util::MessageToJsonString(status, &json, o);
  if (!s.ok()) {
    HttpResponse r = Page("text/plain; charset=utf-8",
                          "cannot write the status as JSON: " + s.ToString());
    r.status = 500;
    return r;
  }
  return Page("application/json", json + "\n");
}

// gRPC's own health service reads every request whole; the servers
// register HealthService instead.
std::unique_ptr<grpc::ServerBuilderOption> NoDefaultHealthService() {
  return std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr);
}

// Server reflection admitted by `admit` (server/reflection_gate.h).
std::vector<
    std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
Gates(ReflectionAdmission admit) {
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      gates;
  gates.push_back(ReflectionGate(std::move(admit)));
  return gates;
}

CallLimits BlockingCallLimits(const CoordinatorOptions& o) {
  CallLimits limits;
  limits.per_peer = o.max_blocking_calls_per_peer;
  limits.total = o.max_blocking_calls > 0
                     ? o.max_blocking_calls
                     : 256 + 4 * o.job.cluster().max_workers();
  // Each worker's Join and its KV waits, so that a flood of blocking calls
  // cannot keep a job from forming (server/call_limiter.h).
  limits.reserved =
      std::min(4 * o.job.cluster().max_workers(), limits.total / 2);
  limits.what = "blocking calls (Join, KvWait)";
  return limits;
}

}  // namespace

// The RPC boundary: checks fields, calls the tracker or its KV store, and
// converts absl::Status to grpc::Status. Thread-safe (the tracker and the
// limiter are).
//
// Every call is admitted before its request is read (server/gated_service.h
// says why): the job token first (common/security.h says why not in an
// interceptor), then, for the methods that block (Join, KvWait), a place
// in the limiter. The health service needs neither (server/health_service.h).
class CoordinatorServer::Service final : public GatedService<Coordinator> {
 public:
  // `history` receives finished workers' epoch results.
  Service(JobTracker* tracker, MetricsHistory* history, TokenCheck token_check,
          CallLimits blocking)
      : t_(tracker),
        history_(history),
        token_check_(std::move(token_check)),
        blocking_(std::move(blocking)) {
    const Admission token = [this](grpc::ServerContext* context,
                                   const std::function<grpc::Status()>& serve) {
      if (grpc::Status a = token_check_.Check(context); !a.ok()) return a;
      return serve();
    };
    GateUnary("Join", &Coordinator::Service::Join, Limited(true));
    GateUnary("KvWait", &Coordinator::Service::KvWait, Limited(false));
    GateUnary("Heartbeat", &Coordinator::Service::Heartbeat, token);
    GateUnary("KvSet", &Coordinator::Service::KvSet, token);
    GateUnary("KvGet", &Coordinator::Service::KvGet, token);
    GateUnary("KvAdd", &Coordinator::Service::KvAdd, token);
    GateUnary("BeginEpoch", &Coordinator::Service::BeginEpoch, token);
    GateUnary("Finish", &Coordinator::Service::Finish, token);
    GateUnary("GetStatus", &Coordinator::Service::GetStatus, token);
    GateUnary("GetMetrics", &Coordinator::Service::GetMetrics, token);
    GateUnary("Stop", &Coordinator::Service::Stop, token);
    GateUnary("RegisterShard", &Coordinator::Service::RegisterShard, token);
    GateUnary("ShardHeartbeat", &Coordinator::Service::ShardHeartbeat, token);
    GateUnary("PlanPartitions", &Coordinator::Service::PlanPartitions, token);
    CheckAllGated();
  }

  grpc::Status Join(grpc::ServerContext* context, const JoinRequest* request,
                    JoinResponse* response) override {
    if (absl::Status s = CheckAdvertisedAddress(
            absl::StrCat("the worker on host ",
                         QuoteForMessage(request->host())),
            request->address(), context->peer());
        !s.ok()) {
      return ToGrpc(s);
    }
    absl::StatusOr<JoinResponse> joined =
        t_->Join(*request, [context] { return context->IsCancelled(); });
    // This connection's KV waits bootstrap the job's collectives.
    if (joined.ok()) blocking_.AddPriorityPeer(context->peer());
    return Reply(std::move(joined), response);
  }
  grpc::Status Heartbeat(grpc::ServerContext* context,
                         const HeartbeatRequest* request,
                         HeartbeatResponse* response) override {
    return Reply(t_->Heartbeat(*request), response);
  }
  grpc::Status KvSet(grpc::ServerContext* context, const KvSetRequest* request,
                     KvSetResponse*) override {
    if (absl::Status s = CheckKvSetRequest(*request); !s.ok()) return ToGrpc(s);
    return ToGrpc(
        t_->kv().Set(request->generation(), request->key(), request->value()));
  }
  grpc::Status KvGet(grpc::ServerContext* context, const KvGetRequest* request,
                     KvGetResponse* response) override {
    if (absl::Status s = CheckKvGetRequest(*request); !s.ok()) return ToGrpc(s);
    absl::StatusOr<std::optional<std::string>> value =
        t_->kv().Get(request->generation(), request->key());
    if (!value.ok()) return ToGrpc(value.status());
    response->set_found(value->has_value());
    if (*value) response->set_value(std::move(**value));
    return grpc::Status::OK;
  }
  grpc::Status KvWait(grpc::ServerContext* context,
                      const KvWaitRequest* request, KvWaitResponse*) override {
    if (absl::Status s = CheckKvWaitRequest(*request); !s.ok())
      return ToGrpc(s);
    const std::vector<std::string> keys(request->keys().begin(),
                                        request->keys().end());
    return ToGrpc(t_->kv().Wait(request->generation(), keys,
                                absl::Milliseconds(request->timeout_ms()),
                                [context] { return context->IsCancelled(); }));
  }
  grpc::Status KvAdd(grpc::ServerContext* context, const KvAddRequest* request,
                     KvAddResponse* response) override {
    if (absl::Status s = CheckKvAddRequest(*request); !s.ok()) return ToGrpc(s);
    absl::StatusOr<int64_t> value =
        t_->kv().Add(request->generation(), request->key(), request->delta());
    if (!value.ok()) return ToGrpc(value.status());
    response->set_value(*value);
    return grpc::Status::OK;
  }
  grpc::Status BeginEpoch(grpc::ServerContext* context,
                          const BeginEpochRequest* request,
                          BeginEpochResponse* response) override {
    absl::StatusOr<uint64_t> seed = t_->BeginEpoch(*request);
    if (!seed.ok()) return ToGrpc(seed.status());
    response->set_sampler_seed(*seed);
    return grpc::Status::OK;
  }
  grpc::Status Finish(grpc::ServerContext* context,
                      const FinishRequest* request, FinishResponse*) override {
    const absl::Status s = t_->Finish(*request);
    if (s.ok() && request->ok()) {
      history_->RecordResult(request->rank(), request->result());
    }
    return ToGrpc(s);
  }
  grpc::Status GetStatus(grpc::ServerContext* context, const StatusRequest*,
                         StatusResponse* response) override {
    *response = t_->Status();
    return grpc::Status::OK;
  }
  grpc::Status GetMetrics(grpc::ServerContext* context, const MetricsRequest*,
                          MetricsResponse* response) override {
    *response = t_->Metrics();
    return grpc::Status::OK;
  }
  grpc::Status RegisterShard(grpc::ServerContext* context,
                             const RegisterShardRequest* request,
                             RegisterShardResponse* response) override {
    if (absl::Status s = CheckAdvertisedAddress(
            absl::StrCat("the parameter-server shard on host ",
                         QuoteForMessage(request->host())),
            HostOfHostPort(request->address()), context->peer());
        !s.ok()) {
      return ToGrpc(s);
    }
    return Reply(t_->RegisterShard(*request), response);
  }
  grpc::Status ShardHeartbeat(grpc::ServerContext* context,
                              const ShardHeartbeatRequest* request,
                              ShardHeartbeatResponse* response) override {
    return Reply(t_->ShardHeartbeat(*request), response);
  }
  grpc::Status PlanPartitions(grpc::ServerContext* context,
                              const PlanPartitionsRequest* request,
                              PlanPartitionsResponse* response) override {
    return Reply(t_->PlanPartitions(*request), response);
  }
  grpc::Status Stop(grpc::ServerContext* context, const StopRequest* request,
                    StopResponse*) override {
    if (absl::Status s = CheckStopRequest(*request); !s.ok()) return ToGrpc(s);
    t_->Stop(request->reason());
    return grpc::Status::OK;
  }

 private:
  // The token, then a place in the limiter; Join's places may come from
  // the share kept for workers (`priority`), as may those of the calls of a
  // connection that has joined. A refusal is marked as one to retry later
  // (client/busy_refusal.h).
  Admission Limited(bool priority) {
    return [this, priority](grpc::ServerContext* context,
                            const std::function<grpc::Status()>& serve) {
      if (grpc::Status a = token_check_.Check(context); !a.ok()) return a;
      absl::StatusOr<CallLimiter::Slot> slot =
          blocking_.Acquire(context->peer(), priority);
      if (!slot.ok()) {
        context->AddTrailingMetadata(kBusyRefusalKey, "1");
        return ToGrpc(slot.status());
      }
      return serve();
    };
  }

  JobTracker* const t_;
  MetricsHistory* const history_;
  const TokenCheck token_check_;
  CallLimiter blocking_;
};

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    CoordinatorOptions options) {
  FillClusterDefaults(options.job.mutable_cluster());
  RETURN_IF_ERROR(CheckClusterSpec(options.job.cluster()));
  if (options.max_blocking_calls_per_peer < 1 ||
      options.max_blocking_calls < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the bounds on blocking calls must be positive (per connection ",
        options.max_blocking_calls_per_peer, ", in all ",
        options.max_blocking_calls, ")"));
  }
  if (options.job.name().empty()) options.job.set_name("job");
  ASSIGN_OR_RETURN(const ListenAddress where,
                   ParseListenAddress(options.listen));
  RETURN_IF_ERROR(ProbeListen(where));
  if (!options.health_listen.empty()) {
    ASSIGN_OR_RETURN(const ListenAddress health,
                     ParseListenAddress(options.health_listen));
    RETURN_IF_ERROR(ProbeListen(health));
  }
  if (!options.report_path.empty()) {
    if (absl::Status s = CheckCanWriteFile(options.report_path); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--report: ", s.message()));
    }
  }
  std::unique_ptr<DirectoryLock> state_lock;
  if (!options.state_dir.empty()) {
    if (options.job.mode() == PS) {
      return absl::FailedPreconditionError(
          "--state-dir: coordinator restarts are supported for all-reduce "
          "jobs only, not yet for parameter-server jobs");
    }
    std::error_code error;
    std::filesystem::create_directories(options.state_dir, error);
    if (error) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--state-dir ", options.state_dir, ": ", error.message()));
    }
    // Two coordinators on one state directory would each take the other's
    // job for its own; the lock is held for this process's life.
    absl::StatusOr<std::unique_ptr<DirectoryLock>> lock =
        DirectoryLock::Acquire(
            options.state_dir,
            absl::StrCat("pid ", getpid(),
                         ", coordinator --listen=", options.listen));
    if (!lock.ok()) {
      return absl::Status(
          lock.status().code(),
          absl::StrCat("--state-dir: ", lock.status().message()));
    }
    state_lock = *std::move(lock);
  }
  ASSIGN_OR_RETURN(TokenCheck token_check,
                   TokenCheck::FromOptions(options.security));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   ServerCredentials(options.security));
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer(
      std::move(options), where.host, std::move(token_check)));
  server->state_lock_ = std::move(state_lock);
  RETURN_IF_ERROR(server->tracker_->Restore());
  // Before gRPC, so that a busy metrics port fails the start cleanly.
  RETURN_IF_ERROR(server->ServeMetrics());
  RETURN_IF_ERROR(server->Serve(std::move(credentials)));
  if (!server->options_.health_listen.empty()) {
    RETURN_IF_ERROR(server->ServeHealth());
  }
  if (server->state_lock_ != nullptr) {
    server->state_lock_->SetHolder(
        absl::StrCat("pid ", getpid(), ", coordinator at ", server->address()));
  }
  return server;
}

CoordinatorServer::CoordinatorServer(CoordinatorOptions options,
                                     std::string host, TokenCheck token_check)
    : options_(std::move(options)),
      host_(std::move(host)),
      token_check_(token_check),
      tracker_(std::make_unique<JobTracker>(
          options_.job, options_.state_dir.empty()
                            ? ""
                            : options_.state_dir + "/coordinator.state")),
      history_(std::make_unique<MetricsHistory>()),
      health_(std::make_unique<HealthService>(
          [this](const grpc::ServerContext& context) {
            return token_check_.Check(&context).ok();
          })),
      service_(std::make_unique<Service>(tracker_.get(), history_.get(),
                                         std::move(token_check),
                                         BlockingCallLimits(options_))) {}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

absl::Status CoordinatorServer::Serve(
    std::shared_ptr<grpc::ServerCredentials> credentials) {
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen, std::move(credentials), &port_);
  builder.RegisterService(service_.get());
  builder.RegisterService(health_.get());
  builder.SetOption(NoDefaultHealthService());
  builder.experimental().SetInterceptorCreators(
      Gates([this](const grpc::ServerContext& context) {
        return token_check_.Check(&context);
      }));
  // A KV value may be 64 MiB; gRPC's default limit is 4 MiB.
  builder.SetMaxReceiveMessageSize(kMaxValueBytes + (1 << 20));
  // What a caller may send before a handler reads its request (refused
  // callers included: GatedService) is the HTTP/2 receive window. With BDP
  // probing gRPC grows it to several MiB per connection, and 48
  // connections of refused 64 MiB calls held 30 MB; without, 64 KiB, and
  // a request being read still gets a window of its whole size (a 64 MiB
  // KvSet was no slower).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  // gRPC sets SO_REUSEPORT by default, which would let a second
  // coordinator silently share the port instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  AcceptKeepalivePings(builder);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options_.listen,
                     ": gRPC could not start a server there"));
  }
  // Named so that a check of "cohort.Coordinator" (not only of the whole
  // server, "") answers.
  health_->SetServingStatus(Coordinator::service_full_name(), true);
  health_->SetServingStatus(true);
  const ClusterSpec& c = options_.job.cluster();
  LOG(INFO) << "coordinator of job " << options_.job.name() << " listening on "
            << address() << " (" << c.min_workers() << ".." << c.max_workers()
            << " workers; " << SecuritySummary(options_.security) << ")";
  return absl::OkStatus();
}

// The health service alone, in plaintext and without the token: it reads
// no request, and refuses reflection (which gRPC adds to every server).
absl::Status CoordinatorServer::ServeHealth() {
  probe_health_ = std::make_unique<HealthService>(
      [](const grpc::ServerContext&) { return false; });
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.health_listen,
                           grpc::InsecureServerCredentials(), &health_port_);
  builder.RegisterService(probe_health_.get());
  builder.SetOption(NoDefaultHealthService());
  builder.experimental().SetInterceptorCreators(
      Gates([](const grpc::ServerContext&) {
        return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                            "this port (--health-listen) serves only "
                            "grpc.health.v1.Health");
      }));
  // What an unread call may send stays 64 KiB (see Serve).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  health_server_ = builder.BuildAndStart();
  if (health_server_ == nullptr || health_port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options_.health_listen,
                     " (--health-listen): gRPC could not start a server "
                     "there"));
  }
  probe_health_->SetServingStatus(Coordinator::service_full_name(), true);
  probe_health_->SetServingStatus(true);
  LOG(INFO) << "health service also on " << options_.health_listen
            << " (plaintext, port " << health_port_ << ")";
  return absl::OkStatus();
}

absl::Status CoordinatorServer::ServeMetrics() {
  if (options_.metrics_listen.empty()) return absl::OkStatus();
  HttpServerOptions o;
  o.listen = options_.metrics_listen;
  o.what = "--metrics-listen";
  o.routes["/metrics"] = [this](const HttpRequest&) {
    return Page(kPrometheusContentType,
                CoordinatorMetricsText(tracker_->Status()));
  };
  o.routes["/"] = [](const HttpRequest&) {
    return Page("text/html; charset=utf-8", std::string(DashboardHtml()));
  };
  o.routes["/api/status"] = [this](const HttpRequest&) {
    return StatusJson(tracker_->Status());
  };
  o.routes["/api/history"] = [this](const HttpRequest&) {
    return Page("application/json", history_->Json());
  };
  ASSIGN_OR_RETURN(metrics_server_, HttpServer::Start(std::move(o)));
  history_thread_ = std::thread([this] { SampleHistory(); });
  LOG(INFO) << "metrics at http://" << metrics_server_->address()
            << "/metrics, dashboard at http://" << metrics_server_->address()
            << "/ (plaintext)";
  return absl::OkStatus();
}

// Once a second until Shutdown (MetricsHistory says why a second).
void CoordinatorServer::SampleHistory() {
  while (true) {
    history_->Record(tracker_->Status());
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stop_sampling_),
                             absl::Seconds(1))) {
      return;
    }
  }
}

int CoordinatorServer::metrics_port() const {
  return metrics_server_ != nullptr ? metrics_server_->port() : 0;
}

std::string CoordinatorServer::address() const {
  return absl::StrCat(host_, ":", port_);
}

JobState CoordinatorServer::Wait() {
  const JobState state = tracker_->WaitForEnd(options_.serve_after_done);
  WriteReportOnce();
  return state;
}

void CoordinatorServer::WriteReportOnce() {
  absl::MutexLock lock(&mu_);
  if (report_done_ || options_.report_path.empty()) return;
  report_done_ = true;
  report_status_ =
      WriteFileAtomically(options_.report_path, tracker_->ReportJson());
  if (!report_status_.ok()) {
    LOG(ERROR) << "cannot write the report: " << report_status_.message();
  }
}

void CoordinatorServer::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  health_->Shutdown();
  if (probe_health_) probe_health_->Shutdown();
  tracker_->Shutdown();  // blocked Join/KvWait calls return now
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(1));
    server_->Wait();
  }
  if (health_server_) {
    health_server_->Shutdown(std::chrono::system_clock::now() +
                             std::chrono::seconds(1));
    health_server_->Wait();
  }
  {
    absl::MutexLock lock(&mu_);
    stop_sampling_ = true;
  }
  if (history_thread_.joinable()) history_thread_.join();
  if (metrics_server_ != nullptr) metrics_server_->Shutdown();
}

StatusResponse CoordinatorServer::Status() const { return tracker_->Status(); }

MetricsResponse CoordinatorServer::Metrics() const {
  return tracker_->Metrics();
}

absl::Status CoordinatorServer::report_status() const {
  absl::MutexLock lock(&mu_);
  return report_status_;
}

}  // namespace cohort

#include "server/health_service.h"

#include <utility>

#include "absl/time/time.h"

namespace cohort {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// How often a waiting watch looks whether its client went away.
constexpr absl::Duration kWatchPoll = absl::Milliseconds(200);

CallLimits WatchLimits() {
  CallLimits limits;
  limits.per_peer = 4;
  limits.total = 64;
  limits.what = "health watches";
  return limits;
}

}  // namespace

HealthService::HealthService(Trusted trusted)
    : trusted_(std::move(trusted)), watches_(WatchLimits()) {
  serving_[""] = true;
  const Admission open = [](grpc::ServerContext*,
                            const std::function<grpc::Status()>& serve) {
    return serve();
  };
  GateUnary("Check", &grpc::health::v1::Health::Service::Check, open);
  GateServerStreaming<HealthCheckRequest, HealthCheckResponse>(
      "Watch",
      [this](grpc::ServerContext* context, const HealthCheckRequest* request,
             grpc::internal::WriterInterface<HealthCheckResponse>* writer) {
        return ServeWatch(context, request, writer);
      },
      [this](grpc::ServerContext* context,
             const std::function<grpc::Status()>& serve) {
        absl::StatusOr<CallLimiter::Slot> slot =
            watches_.Acquire(context->peer());
        if (!slot.ok()) {
          return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                              std::string(slot.status().message()));
        }
        return serve();
      });
  CheckAllGated();
}

void HealthService::SetServingStatus(const std::string& service, bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  serving_[service] = serving;
  ++changes_;
}

void HealthService::SetServingStatus(bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  for (auto& [service, status] : serving_) status = serving;
  ++changes_;
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&mu_);
  for (auto& [service, status] : serving_) status = false;
  shut_down_ = true;
  ++changes_;
}

HealthService::ServingStatus HealthService::StatusOf(
    const std::string& service) const {
  auto it = serving_.find(service);
  if (it == serving_.end()) return HealthCheckResponse::SERVICE_UNKNOWN;
  return it->second ? HealthCheckResponse::SERVING
                    : HealthCheckResponse::NOT_SERVING;
}

grpc::Status HealthService::Check(grpc::ServerContext*,
                                  const HealthCheckRequest* request,
                                  HealthCheckResponse* response) {
  absl::MutexLock lock(&mu_);
  const ServingStatus status = StatusOf(request->service());
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service");
  }
  response->set_status(status);
  return grpc::Status::OK;
}

// Sends the status at once and then each time it changes, until the client
// goes away or Shutdown.
grpc::Status HealthService::ServeWatch(
    grpc::ServerContext* context, const HealthCheckRequest* request,
    grpc::internal::WriterInterface<HealthCheckResponse>* writer) {
  bool first = true;
  uint64_t seen = 0;
  ServingStatus sent = HealthCheckResponse::UNKNOWN;
  while (!context->IsCancelled()) {
    ServingStatus now;
    bool last;
    {
      absl::MutexLock lock(&mu_);
      auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return first || changes_ != seen;
      };
      if (!mu_.AwaitWithTimeout(absl::Condition(&changed), kWatchPoll)) {
        continue;
      }
      first = false;
      seen = changes_;
      now = StatusOf(request->service());
      last = shut_down_;
    }
    if (now != sent) {
      HealthCheckResponse response;
      response.set_status(now);
      if (!writer->Write(response)) break;
      sent = now;
    }
    if (last) return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::CANCELLED,
                      "the client went away or the server shut down");
}

}  // namespace cohort

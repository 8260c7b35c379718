// grpc.health.v1.Health for the coordinator's servers, in place of gRPC's
// default health service, so that a health check costs no memory whoever
// sends it.
//
// Why not gRPC's own: the health service stays open without the job token
// (probes carry no secret), and gRPC's service reads each request whole
// before it looks at it, up to the server's receive limit (65 MiB on the
// coordinator): 48 concurrent 64 MiB checks took a coordinator from 24 MB to
// 768 MB. A lower receive limit does not help: gRPC 1.51 buffers the whole
// message before it compares its size with the limit (8 such calls against a
// 1 KiB limit: +300 MB), and nothing in its API lets a handler read only the
// first bytes. So this service reads a request only from a caller it trusts
// (one with the token, or any caller of a server without one); it answers
// everyone else for the whole server (service "") without reading a byte of
// the body, which HTTP/2 flow control then holds to 64 KiB per call
// (server/gated_service.h). The services a coordinator names ("" and
// cohort.Coordinator) always share their status, so a probe that names
// either gets the same answer; only an unknown name is answered SERVING
// instead of NOT_FOUND for an untrusted caller.
//
// Watch holds a server thread while it waits for changes, like the blocking
// calls of server/call_limiter.h, and is bounded the same way.
//
// Ownership: the owner registers the service with its servers and keeps it
// until they have shut down. Thread-safe.
#ifndef COHORT_SERVER_HEALTH_SERVICE_H_
#define COHORT_SERVER_HEALTH_SERVICE_H_

#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "server/call_limiter.h"
#include "server/gated_service.h"

namespace cohort {

class HealthService final : public GatedService<grpc::health::v1::Health> {
 public:
  using Trusted = std::function<bool(const grpc::ServerContext&)>;
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  // `trusted`: whether a call's request may be read (see above). The whole
  // server ("") starts SERVING, as with gRPC's own service.
  explicit HealthService(Trusted trusted);

  // SERVING or NOT_SERVING for `service` ("": the whole server). Ignored
  // after Shutdown.
  void SetServingStatus(const std::string& service, bool serving);
  // The same for every service set so far.
  void SetServingStatus(bool serving);
  // NOT_SERVING for every service from now on; open watches send it and
  // end.
  void Shutdown();

  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;

 private:
  bool ReadsRequest(const grpc::ServerContext& context) const override {
    return trusted_(context);
  }
  grpc::Status ServeWatch(
      grpc::ServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request,
      grpc::internal::WriterInterface<grpc::health::v1::HealthCheckResponse>*
          writer);
  // SERVING, NOT_SERVING, or SERVICE_UNKNOWN for a service never set.
  ServingStatus StatusOf(const std::string& service) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Trusted trusted_;
  CallLimiter watches_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, bool> serving_ ABSL_GUARDED_BY(mu_);
  // Counts changes, so that a watch sees whether anything changed.
  uint64_t changes_ ABSL_GUARDED_BY(mu_) = 0;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace cohort

#endif  // COHORT_SERVER_HEALTH_SERVICE_H_

// A generated gRPC service whose methods decide whether to serve a call from
// its metadata alone, before its request is read: the job token is checked
// (and a CallLimiter slot taken) before a byte of the body is buffered.
//
// Why this is needed: gRPC's synchronous server reads a unary (or
// server-streaming) method's whole request before it calls the handler, so
// a check in the handler runs only after the server has buffered up to the
// receive limit (65 MiB on the coordinator) for a caller it then refuses.
// Registered as "streamed" (grpc::Service::MarkMethodStreamed) a method's
// handler runs as soon as the initial metadata has arrived; on the wire it
// stays a plain unary (or server-streaming) call, so clients do not change.
// GateUnary and GateServerStreaming do that for one method: the handler runs
// the Admission, which reads the request, calls the service's typed method and
// writes the response only when it lets the call in. Client-streaming
// methods (the shard's Init and Push) need none of this: their handlers run
// after the metadata already, and check the token before their first Read.
//
// A refused call is answered without reading its body; what its client had
// already sent is bounded by HTTP/2 flow control (the coordinator keeps the
// window small: see its Serve).
//
// Usage: a service class derives from GatedService<Generated> (Generated is
// the class generated for the proto service, e.g. cohort::Coordinator),
// gates each method in its constructor, then calls CheckAllGated(), so that
// a method added to the .proto later cannot be served ungated.
//
// A service that answers some callers without their request (the health
// service, for callers without the token) overrides ReadsRequest.
//
// Thread safety: the Gate* calls and CheckAllGated belong in the
// constructor (before the service is registered with a server); the
// handlers they install run on gRPC's threads and are as thread-safe as the
// admission and the typed methods they call.
#ifndef COHORT_SERVER_GATED_SERVICE_H_
#define COHORT_SERVER_GATED_SERVICE_H_

#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/method_handler.h>

#include <functional>
#include <set>
#include <string>

#include "common/logging.h"

namespace cohort {

// Decides, from the call's metadata (context), whether to serve it: runs
// `serve` (read the request, call the method, write the response) and
// returns its status, or returns a refusal without calling it. It may hold
// a resource while `serve` runs (a CallLimiter slot).
using Admission = std::function<grpc::Status(
    grpc::ServerContext* context, const std::function<grpc::Status()>& serve)>;

template <typename Generated>
class GatedService : public Generated::Service {
 public:
  template <typename Request, typename Response>
  using UnaryMethod = grpc::Status (Generated::Service::*)(grpc::ServerContext*,
                                                           const Request*,
                                                           Response*);
  template <typename Request, typename Response>
  using ServerStreamingMethod =
      std::function<grpc::Status(grpc::ServerContext*, const Request*,
                                 grpc::internal::WriterInterface<Response>*)>;

 protected:
  // Serves the unary method the .proto names `name` (e.g. "KvSet"):
  // `admit`, then `method` (the typed override, called virtually).
  template <typename Request, typename Response>
  void GateUnary(const std::string& name, UnaryMethod<Request, Response> method,
                 Admission admit) {
    const int index = MethodIndex<Request, Response>(name, false);
    auto handler = [this, method, admit = std::move(admit)](
                       grpc::ServerContext* context,
                       grpc::ServerReaderWriter<Response, Request>* stream) {
      return admit(context, [&]() -> grpc::Status {
        Request request;
        if (ReadsRequest(*context) && !stream->Read(&request)) {
          return Unreadable<Request>();
        }
        Response response;
        const grpc::Status s = (this->*method)(context, &request, &response);
        if (!s.ok()) return s;
        if (!stream->Write(response)) return ClientGone();
        return grpc::Status::OK;
      });
    };
    this->MarkMethodStreamed(
        index, new Handler<Request, Response>(std::move(handler)));
  }

  // The same for a server-streaming method; `method` writes its responses
  // to the writer it is given (gRPC's ServerWriter cannot be made here).
  template <typename Request, typename Response>
  void GateServerStreaming(const std::string& name,
                           ServerStreamingMethod<Request, Response> method,
                           Admission admit) {
    const int index = MethodIndex<Request, Response>(name, true);
    auto handler = [this, method = std::move(method), admit = std::move(admit)](
                       grpc::ServerContext* context,
                       grpc::ServerReaderWriter<Response, Request>* stream) {
      return admit(context, [&]() -> grpc::Status {
        Request request;
        if (ReadsRequest(*context) && !stream->Read(&request)) {
          return Unreadable<Request>();
        }
        return method(context, &request, stream);
      });
    };
    this->MarkMethodStreamed(
        index, new Handler<Request, Response>(std::move(handler)));
  }

  // Whether the admitted call's request is read. When not, the method gets
  // an empty request, and the call's body is never read, whatever its
  // size: for a service that must answer callers it cannot trust with a
  // body (the health service), as gRPC 1.51 cannot bound what one Read
  // takes in (a receive limit refuses a message once it is buffered whole).
  // Every method reads its request unless a service says otherwise.
  virtual bool ReadsRequest(const grpc::ServerContext& context) const {
    return true;
  }

  // CHECK-fails unless every method whose request is not a client stream
  // has been gated.
  void CheckAllGated() const {
    const google::protobuf::ServiceDescriptor* service = Descriptor();
    for (int i = 0; i < service->method_count(); ++i) {
      const google::protobuf::MethodDescriptor* m = service->method(i);
      CHECK(m->client_streaming() || gated_.count(m->name()) > 0)
          << service->full_name() << "." << m->name()
          << " is served without an admission check (GatedService)";
    }
  }

 private:
  // A streamed method's handler, given a stream that may also be written
  // without having been read (gRPC's own unary and split streamers refuse
  // that), so that ReadsRequest can be false.
  template <typename Request, typename Response>
  using Handler = grpc::internal::TemplatedBidiStreamingHandler<
      grpc::ServerReaderWriter<Response, Request>, /*WriteNeeded=*/false>;

  static const google::protobuf::ServiceDescriptor* Descriptor() {
    const google::protobuf::ServiceDescriptor* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
            Generated::service_full_name());
    CHECK(service != nullptr) << Generated::service_full_name();
    return service;
  }

  // The generated Service adds its methods in the order of the .proto, so
  // the descriptor's index is the method's index in grpc::Service.
  template <typename Request, typename Response>
  int MethodIndex(const std::string& name, bool server_streaming) {
    const google::protobuf::MethodDescriptor* m =
        Descriptor()->FindMethodByName(name);
    CHECK(m != nullptr) << Generated::service_full_name() << " has no " << name;
    CHECK(m->input_type() == Request::descriptor() &&
          m->output_type() == Response::descriptor() &&
          !m->client_streaming() && m->server_streaming() == server_streaming)
        << name << ": the handler's types do not match the .proto";
    CHECK(gated_.insert(name).second) << name << " gated twice";
    return m->index();
  }

  template <typename Request>
  static grpc::Status Unreadable() {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the request is missing or is not a valid " +
                            std::string(Request::descriptor()->full_name()));
  }
  static grpc::Status ClientGone() {
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        "the client went away before the response was sent");
  }

  std::set<std::string> gated_;
};

}  // namespace cohort

#endif  // COHORT_SERVER_GATED_SERVICE_H_

// Admits calls to gRPC's server reflection before the reflection service
// reads a request: a refused call is ended with the admission's status and
// its body is never read.
//
// Why: reflection reads each request whole, up to the server's receive
// limit (65 MiB on the coordinator), and 16 concurrent 64 MiB reflection
// requests without the job token took a coordinator from 25 MB to 4 GB.
// Reflection is gRPC's own service (libgrpc++_reflection, added by its
// plugin), so the check cannot sit in it as in cohort's services
// (server/gated_service.h). Its one method streams its requests, so gRPC
// runs the server interceptors' POST_RECV_INITIAL_METADATA hook before the
// handler's first Read: there a refused call is cancelled with the status
// (grpc_call_cancel_with_status, as a C++ server interceptor cannot end a
// call otherwise), HTTP/2 flow control holds what its client sent to 64 KiB,
// and the handler's first Read fails at once. Other methods pass untouched.
//
// Ownership: the factory is handed to a ServerBuilder, which owns it. The
// admission runs on gRPC's threads and must be thread-safe.
#ifndef COHORT_SERVER_REFLECTION_GATE_H_
#define COHORT_SERVER_REFLECTION_GATE_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <functional>
#include <memory>

namespace cohort {

// OK to let a reflection call in, else the status to end it with.
using ReflectionAdmission =
    std::function<grpc::Status(const grpc::ServerContext& context)>;

// For ServerBuilder::experimental().SetInterceptorCreators.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
ReflectionGate(ReflectionAdmission admit);

}  // namespace cohort

#endif  // COHORT_SERVER_REFLECTION_GATE_H_

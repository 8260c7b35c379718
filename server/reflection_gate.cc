#include "server/reflection_gate.h"

#include <grpc/grpc.h>

#include <string>
#include <utility>

#include "absl/strings/match.h"

namespace cohort {
namespace {

// Every version of the reflection service: "/grpc.reflection.v1alpha.
// ServerReflection/ServerReflectionInfo", ...
constexpr char kReflection[] = "/grpc.reflection.";

class Gate final : public grpc::experimental::Interceptor {
 public:
  Gate(grpc::experimental::ServerRpcInfo* info,
       const ReflectionAdmission* admit)
      : info_(info), admit_(admit) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                POST_RECV_INITIAL_METADATA)) {
      // The sync server's calls have a grpc::ServerContext.
      auto* context =
          static_cast<grpc::ServerContext*>(info_->server_context());
      const grpc::Status s = (*admit_)(*context);
      if (!s.ok()) {
        const std::string message = s.error_message();
        grpc_call_cancel_with_status(
            context->c_call(), static_cast<grpc_status_code>(s.error_code()),
            message.c_str(), nullptr);
      }
    }
    methods->Proceed();
  }

 private:
  grpc::experimental::ServerRpcInfo* const info_;
  const ReflectionAdmission* const admit_;
};

class GateFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit GateFactory(ReflectionAdmission admit) : admit_(std::move(admit)) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    if (info->method() == nullptr ||
        !absl::StartsWith(info->method(), kReflection)) {
      return nullptr;
    }
    return new Gate(info, &admit_);
  }

 private:
  const ReflectionAdmission admit_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
ReflectionGate(ReflectionAdmission admit) {
  return std::make_unique<GateFactory>(std::move(admit));
}

}  // namespace cohort

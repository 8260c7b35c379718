// Who may talk to a job's gRPC servers: a shared job token and TLS.
//
// The token ("job token") is a secret in a file that every process of the
// job reads. Clients send it on every call as the metadata
// "authorization: Bearer <token>"; the coordinator and the shards refuse a
// call without it (or with another) with UNAUTHENTICATED "missing or wrong
// job token". The grpc.health.v1 service stays open, so probes need no
// secret; it answers a caller without the token without reading its
// request (server/health_service.h). Server reflection needs the token:
// it describes only the public API (cohort's .proto files), but it reads
// its requests whole (server/reflection_gate.h). The token is never logged
// and never part of an error message.
//
// TLS is on for a server when it has a certificate (tls_cert + tls_key),
// and for a client when it has a CA to verify the server with (tls_ca).
// With tls_client_auth a server also requires a client certificate signed
// by its tls_ca (mutual TLS); clients present their tls_cert + tls_key.
// Without TLS the token crosses the network in the clear: use both.
//
// Why the check sits in the services (TokenCheck::Check) rather than in a
// gRPC server interceptor: gRPC 1.51's C++ server interceptors cannot end a
// call (no Hijack on the server side, grpc/grpc#24017), so the handler
// would still run; and an AuthMetadataProcessor only works with secure
// server credentials (InsecureServerCredentials asserts on it), while
// token-only (plaintext) servers must work too. (gRPC's own reflection
// service cannot hold the check: an interceptor cancels its refused calls
// through gRPC's C API, server/reflection_gate.h.) The check must come
// before the request is read, though, or a server buffers each refused
// caller's whole request (up to 65 MiB on the coordinator: 48 such calls
// took it from 24 MB to 1 GB; a lower receive limit does not help, as gRPC
// compares a message with it only once the message is buffered whole): the
// servers register their methods as "streamed", so the check runs as soon
// as the metadata has arrived (server/gated_service.h), their
// client-streaming methods check before their first Read, and the
// coordinator keeps HTTP/2's receive window from growing (no BDP probing),
// so a refused caller gets to send 64 KiB at most. Clients attach the token
// with a client interceptor, not call credentials, because gRPC refuses
// call credentials on an insecure channel.
//
// Everything here is thread-safe: the functions are pure (besides reading
// files) and a TokenCheck is immutable.
#ifndef COHORT_COMMON_SECURITY_H_
#define COHORT_COMMON_SECURITY_H_

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/channel_arguments.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

struct SecurityOptions {
  // A file holding the job token (surrounding whitespace is ignored).
  // Empty: no token is sent, and servers accept every call.
  std::string token_file;
  // PEM files. A server's certificate and key; for a client, the
  // certificate it presents when the server asks (mutual TLS).
  std::string tls_cert, tls_key;
  // PEM file. Client: the CA that signed the servers' certificates (TLS on
  // when set). Server: the CA that must have signed client certificates
  // when tls_client_auth.
  std::string tls_ca;
  // Server: refuse clients without a certificate signed by tls_ca.
  bool tls_client_auth = false;
};

// The token in `path`, without surrounding whitespace. INVALID_ARGUMENT
// naming the path when the file cannot be read, is empty, or holds a
// character that cannot travel in gRPC metadata (anything but printable
// ASCII); the messages never include the file's contents.
absl::StatusOr<std::string> ReadToken(const std::string& path);

// Insecure credentials when `o` has no certificate (INVALID_ARGUMENT if it
// has a tls_ca or tls_client_auth: the job expects TLS); else TLS with the
// certificate and key (and, with tls_client_auth, required client
// certificates signed by tls_ca). The PEM files are read and checked here
// (parsable, key matching the certificate, certificate not expired), so a
// mistake fails at start naming the file rather than as a failed bind.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const SecurityOptions& o);

// Insecure credentials when `o` has no tls_ca; else TLS trusting only
// tls_ca, presenting tls_cert + tls_key when both are set. The token is not
// part of these (see CreateChannel).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const SecurityOptions& o);

// A channel to `target` with ChannelCredentials(o) that sends o's token, if
// any, on every call.
absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateChannel(
    const std::string& target, const SecurityOptions& o,
    const grpc::ChannelArguments& args);

// For a call that failed with UNAVAILABLE `message` under client options
// `o`: " (TLS: ...)" naming the setting that is the likely cause, or ""
// when the failure does not look like TLS. gRPC itself says only "Socket
// closed" when a plaintext client meets a TLS server or a server that
// wants a client certificate.
std::string TlsHint(const SecurityOptions& o, absl::string_view message);

// Whether `message` is a failed TLS handshake (a certificate no CA given
// vouches for, TLS against plaintext): retrying cannot help.
bool IsTlsHandshakeFailure(absl::string_view message);

// For a server's log line: "TLS, client certificates, job token",
// "plaintext, no job token", "plaintext, job token in the clear", ...
std::string SecuritySummary(const SecurityOptions& o);

// Whether `authorization` (a call's metadata value) is "Bearer <token>".
// The time taken depends only on the lengths, never on where the first
// difference is, so a client cannot find the token byte by byte.
bool TokenMatches(absl::string_view authorization, absl::string_view token);

// The server side of the token: Check every call of a service that needs
// the token, before its request is read (see above). A default TokenCheck
// lets every call pass.
class TokenCheck {
 public:
  TokenCheck() = default;
  // Reads o.token_file (no file: let every call pass).
  static absl::StatusOr<TokenCheck> FromOptions(const SecurityOptions& o);
  explicit TokenCheck(std::string token) : token_(std::move(token)) {}

  bool enabled() const { return !token_.empty(); }
  // OK, or UNAUTHENTICATED "missing or wrong job token".
  grpc::Status Check(const grpc::ServerContext* context) const;

 private:
  std::string token_;
};

}  // namespace cohort

#endif  // COHORT_COMMON_SECURITY_H_

#include "common/security.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/client_interceptor.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace cohort {
namespace {

constexpr absl::string_view kBearer = "Bearer ";
constexpr char kAuthorization[] = "authorization";

// --- PEM files, checked with OpenSSL (which gRPC links too) ---

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Refuses to prompt for a pass phrase: an encrypted key is an error.
int NoPassphrase(char*, int, int, void*) { return 0; }

// `what` ("TLS certificate") and the file's contents, or an error naming
// the file.
absl::StatusOr<std::string> ReadPemFile(absl::string_view what,
                                        const std::string& path) {
  absl::StatusOr<std::string> pem = ReadFile(path);
  if (!pem.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", pem.status().message()));
  }
  return pem;
}

// Every certificate in `pem`; an error naming `path` when there is none or
// one is outside its validity period.
absl::StatusOr<std::vector<Cert>> ParseCertificates(absl::string_view what,
                                                    const std::string& path,
                                                    const std::string& pem) {
  std::vector<Cert> certs;
  Bio bio = MemoryBio(pem);
  while (true) {
    Cert c(PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr));
    if (c == nullptr) break;
    certs.push_back(std::move(c));
  }
  ERR_clear_error();  // the end of the file reads as an error
  if (certs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, ": no PEM certificate in it"));
  }
  for (const Cert& c : certs) {
    if (X509_cmp_current_time(X509_get0_notAfter(c.get())) < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", path, ": a certificate in it has expired"));
    }
    if (X509_cmp_current_time(X509_get0_notBefore(c.get())) > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " ", path, ": a certificate in it is not valid yet"));
    }
  }
  return certs;
}

struct KeyPair {
  std::string cert_pem, key_pem;
};

// The certificate chain and its key, checked to belong together.
absl::StatusOr<KeyPair> ReadKeyPair(const SecurityOptions& o) {
  if (o.tls_cert.empty() || o.tls_key.empty()) {
    return absl::InvalidArgumentError(
        o.tls_cert.empty()
            ? "a TLS key (--tls-key) needs its certificate (--tls-cert)"
            : "a TLS certificate (--tls-cert) needs its key (--tls-key)");
  }
  KeyPair p;
  absl::StatusOr<std::string> cert = ReadPemFile("TLS certificate", o.tls_cert);
  if (!cert.ok()) return cert.status();
  p.cert_pem = *std::move(cert);
  absl::StatusOr<std::string> key = ReadPemFile("TLS key", o.tls_key);
  if (!key.ok()) return key.status();
  p.key_pem = *std::move(key);
  absl::StatusOr<std::vector<Cert>> chain =
      ParseCertificates("TLS certificate", o.tls_cert, p.cert_pem);
  if (!chain.ok()) return chain.status();
  Bio bio = MemoryBio(p.key_pem);
  Key k(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  ERR_clear_error();
  if (k == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS key ", o.tls_key, ": no unencrypted PEM private key in it"));
  }
  // The first certificate is the leaf, the one the key must match.
  const bool match = X509_check_private_key(chain->front().get(), k.get()) == 1;
  ERR_clear_error();
  if (!match) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS key ", o.tls_key, " does not match the certificate ", o.tls_cert));
  }
  return p;
}

absl::StatusOr<std::string> ReadCa(const std::string& path) {
  absl::StatusOr<std::string> pem = ReadPemFile("TLS CA", path);
  if (!pem.ok()) return pem.status();
  absl::StatusOr<std::vector<Cert>> certs =
      ParseCertificates("TLS CA", path, *pem);
  if (!certs.ok()) return certs.status();
  return pem;
}

// --- the token on the client side ---

// Adds the authorization metadata to each call.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(std::shared_ptr<const std::string> header)
      : header_(std::move(header)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    if (m->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      m->GetSendInitialMetadata()->emplace(kAuthorization, *header_);
    }
    m->Proceed();
  }

 private:
  const std::shared_ptr<const std::string> header_;
};

class TokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(const std::string& token)
      : header_(
            std::make_shared<const std::string>(absl::StrCat(kBearer, token))) {
  }
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(header_);
  }

 private:
  const std::shared_ptr<const std::string> header_;
};

// Shorter tokens are refused by nothing but warned about (WarnIfGuessable).
constexpr size_t kMinTokenChars = 16;

// A token short enough to guess protects nothing, but refusing it would
// break jobs that work today: say so once per process.
void WarnIfGuessable(const std::string& path, const std::string& token) {
  if (token.size() >= kMinTokenChars) return;
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  std::fprintf(stderr,
               "cohort: warning: the job token in %s has only %zu "
               "characters, which anyone who can reach the port can guess; "
               "use at least %zu random ones (e.g. head -c 24 /dev/urandom "
               "| base64 > %s)\n",
               path.c_str(), token.size(), kMinTokenChars, path.c_str());
}

}  // namespace

absl::StatusOr<std::string> ReadToken(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job token file: ", text.status().message()));
  }
  const std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job token file ", path, " is empty"));
  }
  for (const char c : token) {
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job token file ", path,
          ": the token may hold only printable ASCII characters (it travels "
          "in gRPC metadata)"));
    }
  }
  WarnIfGuessable(path, token);
  return token;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const SecurityOptions& o) {
  if (o.tls_cert.empty() && o.tls_key.empty()) {
    if (o.tls_client_auth) {
      return absl::InvalidArgumentError(
          "--tls-client-auth needs the server's own certificate "
          "(--tls-cert, --tls-key) and a CA (--tls-ca)");
    }
    if (!o.tls_ca.empty()) {
      // Its clients, given the same flags, would expect TLS.
      return absl::InvalidArgumentError(
          "--tls-ca without --tls-cert and --tls-key: this server would "
          "serve plaintext to clients that expect TLS");
    }
    return grpc::InsecureServerCredentials();
  }
  absl::StatusOr<KeyPair> pair = ReadKeyPair(o);
  if (!pair.ok()) return pair.status();
  grpc::SslServerCredentialsOptions ssl(
      o.tls_client_auth
          ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
          : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  if (o.tls_client_auth) {
    if (o.tls_ca.empty()) {
      return absl::InvalidArgumentError(
          "--tls-client-auth needs the CA that signs client certificates "
          "(--tls-ca)");
    }
    absl::StatusOr<std::string> ca = ReadCa(o.tls_ca);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
  }
  ssl.pem_key_cert_pairs.push_back({pair->key_pem, pair->cert_pem});
  return grpc::SslServerCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const SecurityOptions& o) {
  if (o.tls_ca.empty()) return grpc::InsecureChannelCredentials();
  absl::StatusOr<std::string> ca = ReadCa(o.tls_ca);
  if (!ca.ok()) return ca.status();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = *std::move(ca);
  if (!o.tls_cert.empty() || !o.tls_key.empty()) {
    absl::StatusOr<KeyPair> pair = ReadKeyPair(o);
    if (!pair.ok()) return pair.status();
    ssl.pem_private_key = std::move(pair->key_pem);
    ssl.pem_cert_chain = std::move(pair->cert_pem);
  }
  return grpc::SslCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateChannel(
    const std::string& target, const SecurityOptions& o,
    const grpc::ChannelArguments& args) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
      ChannelCredentials(o);
  if (!creds.ok()) return creds.status();
  if (o.token_file.empty()) {
    return grpc::CreateCustomChannel(target, *creds, args);
  }
  absl::StatusOr<std::string> token = ReadToken(o.token_file);
  if (!token.ok()) return token.status();
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(std::make_unique<TokenInterceptorFactory>(*token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      target, *creds, args, std::move(interceptors));
}

bool IsTlsHandshakeFailure(absl::string_view message) {
  return absl::StrContains(message, "Ssl handshake failed");
}

std::string TlsHint(const SecurityOptions& o, absl::string_view message) {
  if (absl::StrContains(message, "wrong version number")) {
    return " (TLS: the server does not seem to use TLS; start it with "
           "--tls-cert and --tls-key, or drop --tls-ca here)";
  }
  if (absl::StrContains(message, "certificate verify failed")) {
    return absl::StrCat(
        " (TLS: the server's certificate is not signed by the CA in ", o.tls_ca,
        ", or does not name the host dialled)");
  }
  if (IsTlsHandshakeFailure(message)) {
    return " (TLS: the handshake failed; check --tls-ca, --tls-cert and "
           "--tls-key on both sides)";
  }
  if (!absl::StrContains(message, "Socket closed")) return "";
  if (o.tls_ca.empty()) {
    return " (if the server uses TLS, pass --tls-ca with the CA that signed "
           "its certificate)";
  }
  if (o.tls_cert.empty()) {
    return " (if the server requires client certificates "
           "(--tls-client-auth), pass --tls-cert and --tls-key)";
  }
  return " (if the server requires client certificates, --tls-cert must be "
         "signed by the server's --tls-ca)";
}

std::string SecuritySummary(const SecurityOptions& o) {
  const bool tls = !o.tls_cert.empty();
  const bool token = !o.token_file.empty();
  return absl::StrCat(tls ? "TLS" : "plaintext",
                      tls && o.tls_client_auth ? ", client certificates" : "",
                      token ? (tls ? ", job token" : ", job token in the clear")
                            : ", no job token");
}

bool TokenMatches(absl::string_view authorization, absl::string_view token) {
  // Every byte of the expected value is compared, whatever the input; a
  // short input compares as zeros and a length mismatch fails at the end.
  const size_t n = kBearer.size() + token.size();
  unsigned diff = authorization.size() == n ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char want =
        i < kBearer.size() ? kBearer[i] : token[i - kBearer.size()];
    const unsigned char got = i < authorization.size() ? authorization[i] : 0;
    diff |= want ^ got;
  }
  return diff == 0 && !token.empty();
}

absl::StatusOr<TokenCheck> TokenCheck::FromOptions(const SecurityOptions& o) {
  if (o.token_file.empty()) return TokenCheck();
  absl::StatusOr<std::string> token = ReadToken(o.token_file);
  if (!token.ok()) return token.status();
  return TokenCheck(*std::move(token));
}

grpc::Status TokenCheck::Check(const grpc::ServerContext* context) const {
  if (token_.empty()) return grpc::Status::OK;
  bool ok = false;
  const auto range = context->client_metadata().equal_range(kAuthorization);
  for (auto it = range.first; it != range.second; ++it) {
    const absl::string_view value(it->second.data(), it->second.size());
    ok |= TokenMatches(value, token_);
  }
  if (ok) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "missing or wrong job token");
}

}  // namespace cohort

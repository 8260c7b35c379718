// The job token and TLS, against real servers on 127.0.0.1: every method of
// the coordinator and of a shard refuses a call without the right token,
// health answers without it, TLS and mutual TLS accept exactly the clients
// they should, and bad token or PEM files fail naming the file (the token
// file's own checks are in common/security_test.cc).
#include "common/security.h"

#include <google/protobuf/descriptor.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "client/coordinator_client.h"
#include "client/ps_client.h"
#include "common/partition.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "server/coordinator.h"
#include "server/ps/shard_server.h"
#include "server/test_util.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kUnauthenticated[] = "missing or wrong job token";

std::string TmpDir() {
  const char* d = std::getenv("TEST_TMPDIR");
  return d != nullptr ? d : "/tmp";
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The PKI of tests/make_test_certs.sh, made once for the whole test.
class Pki : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(absl::StrCat(TmpDir(), "/pki"));
    const char* root = std::getenv("TEST_SRCDIR");
    const std::string script =
        root ? absl::StrCat(root, "/cohort/tests/make_test_certs.sh")
             : "tests/make_test_certs.sh";
    ASSERT_EQ(std::system(absl::StrCat("bash ", script, " ", *dir_).c_str()),
              0);
  }
  static std::string F(const std::string& name) {
    return absl::StrCat(*dir_, "/", name);
  }
  static std::string Token() {
    return std::string(absl::StripAsciiWhitespace(Slurp(F("token"))));
  }

  // Server side: the server certificate, the token, optionally mTLS.
  static SecurityOptions ServerTls(bool client_auth = false) {
    SecurityOptions o;
    o.token_file = F("token");
    o.tls_cert = F("server.pem");
    o.tls_key = F("server.key");
    o.tls_ca = F("ca.pem");
    o.tls_client_auth = client_auth;
    return o;
  }
  static SecurityOptions ClientTls() {
    SecurityOptions o;
    o.token_file = F("token");
    o.tls_ca = F("ca.pem");
    return o;
  }

 private:
  static std::string* dir_;
};
std::string* Pki::dir_ = nullptr;

// A call to `method` with one empty request message through a generic
// stub, whatever the method's kind; its final status.
grpc::Status CallRaw(const std::shared_ptr<grpc::Channel>& channel,
                     const std::string& method) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, method, &cq);
  void* tag;
  bool ok;
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1);
  grpc::Status status;
  call->StartCall(nullptr);
  cq.Next(&tag, &ok);
  call->Write(request, nullptr);  // may fail once the server has answered
  cq.Next(&tag, &ok);
  call->WritesDone(nullptr);
  cq.Next(&tag, &ok);
  call->Finish(&status, nullptr);
  cq.Next(&tag, &ok);
  return status;
}

// "/cohort.Coordinator/Join", ...: every method the service declares, so a
// method added later without the check fails this test.
std::vector<std::string> Methods(const std::string& service) {
  const google::protobuf::ServiceDescriptor* d =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          service);
  std::vector<std::string> out;
  if (d == nullptr) return out;
  for (int i = 0; i < d->method_count(); ++i) {
    out.push_back(absl::StrCat("/", service, "/", d->method(i)->name()));
  }
  return out;
}

std::shared_ptr<grpc::Channel> Channel(const std::string& address,
                                       const SecurityOptions& o) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> c =
      CreateChannel(address, o, grpc::ChannelArguments());
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : nullptr;
}

void ExpectAllRefused(const std::string& address, const std::string& service,
                      const SecurityOptions& client, size_t expected_methods) {
  const std::vector<std::string> methods = Methods(service);
  ASSERT_EQ(methods.size(), expected_methods) << service;
  const std::shared_ptr<grpc::Channel> channel = Channel(address, client);
  for (const std::string& m : methods) {
    const grpc::Status s = CallRaw(channel, m);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << m;
    EXPECT_EQ(s.error_message(), kUnauthenticated) << m;
  }
}

grpc::health::v1::HealthCheckResponse::ServingStatus Health(
    const std::shared_ptr<grpc::Channel>& channel, grpc::Status* status) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  grpc::health::v1::HealthCheckResponse response;
  *status =
      stub->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
  return response.status();
}

std::unique_ptr<CoordinatorServer> StartCoordinator(
    const SecurityOptions& security, const std::string& health_listen = "") {
  ClusterSpec cluster;
  cluster.set_min_workers(1);
  CoordinatorOptions o;
  o.job = testing::TestJob(cluster);
  o.security = security;
  o.health_listen = health_listen;
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> s =
      CoordinatorServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

// --- files ---

TEST_F(Pki, BadTlsFilesFailNamingTheFile) {
  SecurityOptions o;
  o.tls_cert = F("server.pem");
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> c =
      ServerCredentials(o);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("--tls-key"));

  o.tls_key = F("server.key");
  o.tls_cert = F("server.key");  // a key where the certificate should be
  c = ServerCredentials(o);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr(F("server.key")));
  EXPECT_THAT(c.status().message(), HasSubstr("no PEM certificate"));

  o.tls_cert = F("server.pem");
  o.tls_key = F("client.key");  // another certificate's key
  c = ServerCredentials(o);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("does not match"));
  EXPECT_THAT(c.status().message(), HasSubstr(F("client.key")));

  o.tls_cert = F("expired.pem");
  c = ServerCredentials(o);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr(F("expired.pem")));
  EXPECT_THAT(c.status().message(), HasSubstr("expired"));

  o.tls_cert = F("server.pem");
  o.tls_key = F("missing.key");
  c = ServerCredentials(o);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr(F("missing.key")));

  o.tls_key = F("server.key");
  o.tls_client_auth = true;  // without a CA to check clients with
  c = ServerCredentials(o);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("--tls-ca"));
  o.tls_ca = F("ca.pem");
  EXPECT_TRUE(ServerCredentials(o).ok());

  // A CA but no certificate: clients given the same flags expect TLS.
  SecurityOptions ca_only;
  ca_only.tls_ca = F("ca.pem");
  c = ServerCredentials(ca_only);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("--tls-ca without --tls-cert"));

  SecurityOptions client;
  client.tls_ca = F("nope.pem");
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> cc =
      ChannelCredentials(client);
  ASSERT_FALSE(cc.ok());
  EXPECT_THAT(cc.status().message(), HasSubstr(F("nope.pem")));

  // A coordinator does not start with a bad file, and says which.
  SecurityOptions server = ServerTls();
  server.token_file = F("no-token");
  ClusterSpec cluster;
  CoordinatorOptions co;
  co.job = testing::TestJob(cluster);
  co.security = server;
  const absl::Status s = CoordinatorServer::Start(co).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(F("no-token")));
}

// --- the token ---

TEST_F(Pki, CoordinatorRefusesEveryMethodWithoutTheRightTokenButHealth) {
  SecurityOptions server;
  server.token_file = F("token");
  auto coordinator = StartCoordinator(server);
  ASSERT_NE(coordinator, nullptr);
  const std::string address = coordinator->address();

  ExpectAllRefused(address, Coordinator::service_full_name(), {}, 14);
  SecurityOptions wrong;
  wrong.token_file = F("wrong_token");
  ExpectAllRefused(address, Coordinator::service_full_name(), wrong, 14);

  grpc::Status hs;
  EXPECT_EQ(Health(Channel(address, {}), &hs),
            grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_TRUE(hs.ok()) << hs.error_message();

  // The same client code with the token: a worker joins and uses the KV
  // store; an operator asks for status.
  SecurityOptions client;
  client.token_file = F("token");
  auto worker = CoordinatorClient::Create(address, client);
  ASSERT_TRUE(worker.ok()) << worker.status();
  absl::StatusOr<JoinResponse> join =
      (*worker)->Join(testing::MakeJoin("w0"), absl::Seconds(5));
  ASSERT_TRUE(join.ok()) << join.status();
  EXPECT_EQ(join->rank(), 0);
  ASSERT_TRUE((*worker)->Set("k", "v").ok());
  absl::StatusOr<std::optional<std::string>> v = (*worker)->Get("k");
  ASSERT_TRUE(v.ok() && v->has_value()) << v.status();
  EXPECT_EQ(**v, "v");
  absl::StatusOr<StatusResponse> st = (*worker)->GetStatus(absl::Seconds(5));
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->workers_size(), 1);

  // And without it the client says what is wrong.
  auto stranger = CoordinatorClient::Create(address, wrong);
  ASSERT_TRUE(stranger.ok());
  st = (*stranger)->GetStatus(absl::Seconds(5));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(st.status().message(), HasSubstr(kUnauthenticated));
  EXPECT_THAT(st.status().message(), Not(HasSubstr(Token())));
  // A join is refused at once, not retried for its connect timeout.
  auto anonymous = CoordinatorClient::Create(address);
  ASSERT_TRUE(anonymous.ok());
  const absl::Time start = absl::Now();
  join = (*anonymous)->Join(testing::MakeJoin("w1"), absl::Seconds(30));
  EXPECT_EQ(join.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

// One shard holding a 1000-float model, with `security`.
struct Shard {
  std::unique_ptr<ShardServer> server;
  std::vector<Partition> plan;

  explicit Shard(const SecurityOptions& security) {
    ShardServerOptions so;
    so.job.mutable_optimizer()->set_kind(OptimizerSpec::SGD);
    so.job.mutable_ps()->set_consistency(SYNC);
    so.security = security;
    auto s = ShardServer::Start(so);
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) server = *std::move(s);
    auto p = PlanPartitions({1000}, 1, 1024);
    EXPECT_TRUE(p.ok()) << p.status();
    if (p.ok()) plan = *p;
  }

  // Init then Pull through a PsClient with `client`'s security.
  absl::Status RoundTrip(const SecurityOptions& client) {
    PsClientOptions o;
    o.shard_addresses = {server->address()};
    o.partitions = plan;
    o.worker_id = "w0";
    o.rpc_timeout = absl::Seconds(2);
    o.security = client;
    absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Create(o);
    if (!c.ok()) return c.status();
    std::vector<float> init(1000);
    std::iota(init.begin(), init.end(), 0.0f);
    if (absl::Status s = (*c)->Init(init.data(), 1, 1); !s.ok()) return s;
    std::vector<float> back(1000, -1);
    if (absl::Status s = (*c)->Pull(0, back.data()); !s.ok()) return s;
    EXPECT_EQ(back, init);
    return absl::OkStatus();
  }
};

TEST_F(Pki, ShardRefusesEveryMethodWithoutTheRightToken) {
  SecurityOptions server;
  server.token_file = F("token");
  Shard shard(server);
  ASSERT_NE(shard.server, nullptr);
  ExpectAllRefused(shard.server->address(),
                   ParameterServer::service_full_name(), {}, 4);
  SecurityOptions wrong;
  wrong.token_file = F("wrong_token");
  ExpectAllRefused(shard.server->address(),
                   ParameterServer::service_full_name(), wrong, 4);

  const absl::Status refused = shard.RoundTrip(wrong);
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(refused.message(), HasSubstr("shard 0"));
  EXPECT_THAT(refused.message(), HasSubstr(kUnauthenticated));
  SecurityOptions client;
  client.token_file = F("token");
  EXPECT_TRUE(shard.RoundTrip(client).ok());
}

// --- TLS ---

TEST_F(Pki, TlsCoordinatorAcceptsOnlyClientsTrustingItsCa) {
  auto coordinator = StartCoordinator(ServerTls());
  ASSERT_NE(coordinator, nullptr);
  const std::string address = coordinator->address();

  auto good = CoordinatorClient::Create(address, ClientTls());
  ASSERT_TRUE(good.ok()) << good.status();
  absl::StatusOr<StatusResponse> st = (*good)->GetStatus(absl::Seconds(5));
  EXPECT_TRUE(st.ok()) << st.status();

  // Health over TLS needs no token.
  SecurityOptions tls_only;
  tls_only.tls_ca = F("ca.pem");
  grpc::Status hs;
  EXPECT_EQ(Health(Channel(address, tls_only), &hs),
            grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_TRUE(hs.ok()) << hs.error_message();

  // A client trusting another CA, and one speaking plaintext.
  SecurityOptions other = ClientTls();
  other.tls_ca = F("other_ca.pem");
  SecurityOptions plain = ClientTls();
  plain.tls_ca.clear();
  const std::pair<SecurityOptions, std::string> cases[] = {
      {other, absl::StrCat("not signed by the CA in ", F("other_ca.pem"))},
      {plain, "if the server uses TLS, pass --tls-ca"}};
  for (const auto& [o, hint] : cases) {
    auto c = CoordinatorClient::Create(address, o);
    ASSERT_TRUE(c.ok()) << c.status();
    st = (*c)->GetStatus(absl::Seconds(5));
    ASSERT_FALSE(st.ok()) << hint;
    EXPECT_EQ(st.status().code(), absl::StatusCode::kUnavailable) << hint;
    EXPECT_THAT(st.status().message(), HasSubstr(address));
    EXPECT_THAT(st.status().message(), HasSubstr(hint));
    EXPECT_THAT(st.status().message(), Not(HasSubstr(Token())));
  }
  // A worker that does not trust the server gives up at once rather than
  // retrying for its whole connect timeout.
  auto worker = CoordinatorClient::Create(address, other);
  ASSERT_TRUE(worker.ok());
  const absl::Time start = absl::Now();
  const absl::Status join =
      (*worker)->Join(testing::MakeJoin("w0"), absl::Seconds(30)).status();
  EXPECT_EQ(join.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(join.message(), HasSubstr("certificate verify failed"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(Pki, MutualTlsRefusesClientsWithoutACertificateFromItsCa) {
  auto coordinator = StartCoordinator(ServerTls(/*client_auth=*/true));
  ASSERT_NE(coordinator, nullptr);
  const std::string address = coordinator->address();

  SecurityOptions with_cert = ClientTls();
  with_cert.tls_cert = F("client.pem");
  with_cert.tls_key = F("client.key");
  SecurityOptions stranger = ClientTls();
  stranger.tls_cert = F("stranger.pem");
  stranger.tls_key = F("stranger.key");

  auto c = CoordinatorClient::Create(address, with_cert);
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<StatusResponse> st = (*c)->GetStatus(absl::Seconds(5));
  EXPECT_TRUE(st.ok()) << st.status();

  const std::pair<SecurityOptions, std::string> cases[] = {
      {ClientTls(), "pass --tls-cert and --tls-key"},
      {stranger, "must be signed by the server's --tls-ca"}};
  for (const auto& [o, hint] : cases) {
    c = CoordinatorClient::Create(address, o);
    ASSERT_TRUE(c.ok()) << c.status();
    st = (*c)->GetStatus(absl::Seconds(5));
    ASSERT_FALSE(st.ok()) << hint;
    EXPECT_EQ(st.status().code(), absl::StatusCode::kUnavailable) << hint;
    EXPECT_THAT(st.status().message(), HasSubstr(hint));
  }
}

TEST_F(Pki, TlsShardWithTokenServesATrustingClientOnly) {
  Shard shard(ServerTls());
  ASSERT_NE(shard.server, nullptr);
  EXPECT_TRUE(shard.RoundTrip(ClientTls()).ok());
  SecurityOptions plain = ClientTls();
  plain.tls_ca.clear();
  const absl::Status s = shard.RoundTrip(plain);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("shard 0"));
  EXPECT_THAT(s.message(), HasSubstr("pass --tls-ca"));
  // Another CA: refused at once, not retried until the RPC deadline.
  SecurityOptions other = ClientTls();
  other.tls_ca = F("other_ca.pem");
  const absl::Time start = absl::Now();
  const absl::Status o = shard.RoundTrip(other);
  EXPECT_THAT(o.message(), HasSubstr("certificate verify failed"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

TEST_F(Pki, HealthListenServesPlaintextHealthOnly) {
  auto coordinator = StartCoordinator(ServerTls(true), "127.0.0.1:0");
  ASSERT_NE(coordinator, nullptr);
  ASSERT_GT(coordinator->health_port(), 0);
  ASSERT_NE(coordinator->health_port(), coordinator->port());
  const std::string health =
      absl::StrCat("127.0.0.1:", coordinator->health_port());
  grpc::Status hs;
  EXPECT_EQ(Health(Channel(health, {}), &hs),
            grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_TRUE(hs.ok()) << hs.error_message();
  // The coordinator's own service is not there, token or not.
  SecurityOptions token;
  token.token_file = F("token");
  const grpc::Status s =
      CallRaw(Channel(health, token), "/cohort.Coordinator/GetStatus");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  coordinator->Shutdown();
}

}  // namespace
}  // namespace cohort

#include "common/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A raw TCP client to 127.0.0.1:port: the tests need to send exactly what
// they want, slowly or malformed.
class Client {
 public:
  explicit Client(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~Client() { close(fd_); }
  bool connected() const { return connected_; }

  bool Send(const std::string& s) {
    return send(fd_, s.data(), s.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(s.size());
  }
  // Everything until the server closes, or what came within `timeout`.
  std::string ReadAll(absl::Duration timeout = absl::Seconds(10)) {
    std::string out;
    const absl::Time deadline = absl::Now() + timeout;
    char buf[4096];
    while (true) {
      const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (ms <= 0) break;
      pollfd p = {fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(ms)) <= 0) break;
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      out.append(buf, n);
    }
    return out;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::string Get(int port, const std::string& request) {
  Client c(port);
  EXPECT_TRUE(c.connected());
  c.Send(request);
  return c.ReadAll();
}

std::string Body(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

HttpServerOptions Routes() {
  HttpServerOptions o;
  o.what = "--test-listen";
  o.routes["/metrics"] = [](const HttpRequest& r) {
    HttpResponse out;
    out.content_type = "text/plain; version=0.0.4";
    out.body = absl::StrCat("up 1\n# query=", r.query, "\n");
    return out;
  };
  o.routes["/"] = [](const HttpRequest&) {
    HttpResponse out;
    out.content_type = "text/html; charset=utf-8";
    out.body = "<html></html>";
    return out;
  };
  return o;
}

std::unique_ptr<HttpServer> StartOrDie(HttpServerOptions o) {
  absl::StatusOr<std::unique_ptr<HttpServer>> s = HttpServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

TEST(HttpServerTest, ServesARegisteredPath) {
  std::unique_ptr<HttpServer> s = StartOrDie(Routes());
  ASSERT_NE(s, nullptr);
  EXPECT_GT(s->port(), 0);
  EXPECT_EQ(s->address(), absl::StrCat("127.0.0.1:", s->port()));
  const std::string r =
      Get(s->port(), "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_THAT(r, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(r, HasSubstr("Content-Type: text/plain; version=0.0.4\r\n"));
  EXPECT_THAT(r, HasSubstr("Connection: close\r\n"));
  EXPECT_EQ(Body(r), "up 1\n# query=x=1\n");
  EXPECT_THAT(r, HasSubstr(absl::StrCat("Content-Length: ", Body(r).size())));
}

TEST(HttpServerTest, HeadSendsHeadersOnly) {
  std::unique_ptr<HttpServer> s = StartOrDie(Routes());
  ASSERT_NE(s, nullptr);
  const std::string r = Get(s->port(), "HEAD / HTTP/1.0\r\n\r\n");
  EXPECT_THAT(r, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(r, HasSubstr("Content-Length: 13\r\n"));
  EXPECT_EQ(Body(r), "");
}

TEST(HttpServerTest, AcceptsBareLineFeeds) {
  std::unique_ptr<HttpServer> s = StartOrDie(Routes());
  ASSERT_NE(s, nullptr);
  EXPECT_THAT(Get(s->port(), "GET / HTTP/1.1\nHost: a\n\n"),
              StartsWith("HTTP/1.1 200 OK\r\n"));
}

TEST(HttpServerTest, UnknownPathIs404) {
  std::unique_ptr<HttpServer> s = StartOrDie(Routes());
  ASSERT_NE(s, nullptr);
  const std::string r = Get(s->port(), "GET /nope HTTP/1.1\r\n\r\n");
  EXPECT_THAT(r, StartsWith("HTTP/1.1 404 Not Found\r\n"));
  EXPECT_THAT(Body(r), HasSubstr("no page at /nope"));
}

TEST(HttpServerTest, OtherMethodsAre405) {
  std::unique_ptr<HttpServer> s = StartOrDie(Routes());
  ASSERT_NE(s, nullptr);
  const std::string r =
      Get(s->port(), "POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_THAT(r, StartsWith("HTTP/1.1 405 Method Not Allowed\r\n"));
  EXPECT_THAT(r, HasSubstr("Allow: GET, HEAD\r\n"));
  EXPECT_THAT(Body(r), HasSubstr("/metrics answers GET and HEAD, not POST"));
}

TEST(HttpServerTest, MalformedRequestsAre400Or505) {
  std::unique_ptr<HttpServer> s = StartOrDie(Routes());
  ASSERT_NE(s, nullptr);
  EXPECT_THAT(Get(s->port(), "hello\r\n\r\n"),
              StartsWith("HTTP/1.1 400 Bad Request\r\n"));
  EXPECT_THAT(Get(s->port(), "GET metrics HTTP/1.1\r\n\r\n"),
              StartsWith("HTTP/1.1 400 Bad Request\r\n"));
  EXPECT_THAT(Get(s->port(), "GET / HTTP/2.0\r\n\r\n"),
              StartsWith("HTTP/1.1 505 "));
}

TEST(HttpServerTest, OversizedHeaderIs431) {
  HttpServerOptions o = Routes();
  o.max_request_bytes = 1024;
  std::unique_ptr<HttpServer> s = StartOrDie(o);
  ASSERT_NE(s, nullptr);
  // Without the blank line: the server must stop reading at its limit.
  const std::string r = Get(
      s->port(), "GET / HTTP/1.1\r\nX-Big: " + std::string(8000, 'a') + "\r\n");
  EXPECT_THAT(r, StartsWith("HTTP/1.1 431 "));
  EXPECT_THAT(Body(r), HasSubstr("exceed 1024 bytes"));
  // Complete but too long.
  EXPECT_THAT(Get(s->port(), "GET / HTTP/1.1\r\nX-Big: " +
                                 std::string(2000, 'a') + "\r\n\r\n"),
              StartsWith("HTTP/1.1 431 "));
}

TEST(HttpServerTest, SlowClientTimesOutWithoutBlockingOthers) {
  HttpServerOptions o = Routes();
  o.read_timeout = absl::Milliseconds(500);
  o.connection_threads = 2;
  std::unique_ptr<HttpServer> s = StartOrDie(o);
  ASSERT_NE(s, nullptr);
  Client slow(s->port());
  ASSERT_TRUE(slow.connected());
  slow.Send("GET /metr");
  // Another client is served while the slow one holds a thread.
  const absl::Time t0 = absl::Now();
  EXPECT_THAT(Get(s->port(), "GET / HTTP/1.1\r\n\r\n"),
              StartsWith("HTTP/1.1 200 OK"));
  EXPECT_LT(absl::Now() - t0, absl::Milliseconds(400));
  const std::string r = slow.ReadAll(absl::Seconds(5));
  EXPECT_THAT(r, StartsWith("HTTP/1.1 408 Request Timeout\r\n"));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(2));
}

TEST(HttpServerTest, ConcurrentClients) {
  HttpServerOptions o = Routes();
  std::atomic<int> calls{0};
  o.routes["/count"] = [&calls](const HttpRequest&) {
    ++calls;
    absl::SleepFor(absl::Milliseconds(2));
    return HttpResponse{200, "text/plain", "ok"};
  };
  o.connection_threads = 4;
  o.max_pending = 64;
  std::unique_ptr<HttpServer> s = StartOrDie(o);
  ASSERT_NE(s, nullptr);
  constexpr int kThreads = 16, kEach = 10;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < kEach; ++j) {
        const std::string r = Get(s->port(), "GET /count HTTP/1.1\r\n\r\n");
        if (absl::StartsWith(r, "HTTP/1.1 200 OK") && Body(r) == "ok") ++good;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(good.load(), kThreads * kEach);
  EXPECT_EQ(calls.load(), kThreads * kEach);
}

TEST(HttpServerTest, FullQueueAnswers503AtOnce) {
  HttpServerOptions o = Routes();
  o.connection_threads = 1;
  o.max_pending = 1;
  o.read_timeout = absl::Seconds(20);
  std::unique_ptr<HttpServer> s = StartOrDie(o);
  ASSERT_NE(s, nullptr);
  // Four idle clients: one holds the thread, one waits in the queue, the
  // rest (at least one, whatever the timing) must be turned away at once.
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(std::make_unique<Client>(s->port()));
    ASSERT_TRUE(idle.back()->connected());
    absl::SleepFor(absl::Milliseconds(50));
  }
  int busy = 0;
  for (auto& c : idle) {
    const std::string r = c->ReadAll(absl::Milliseconds(300));
    if (absl::StartsWith(r, "HTTP/1.1 503 ")) ++busy;
  }
  EXPECT_GE(busy, 1);
  EXPECT_LE(busy, 3);
}

TEST(HttpServerTest, ShutdownDoesNotWaitForSlowClients) {
  HttpServerOptions o = Routes();
  o.read_timeout = absl::Seconds(30);
  std::unique_ptr<HttpServer> s = StartOrDie(o);
  ASSERT_NE(s, nullptr);
  Client slow(s->port());
  ASSERT_TRUE(slow.connected());
  slow.Send("GET / HT");
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time t0 = absl::Now();
  s->Shutdown();
  s->Shutdown();  // idempotent
  EXPECT_LT(absl::Now() - t0, absl::Seconds(1));
  EXPECT_EQ(slow.ReadAll(absl::Seconds(2)), "");  // dropped, no answer
  s.reset();
}

TEST(HttpServerTest, AddressInUseIsNamed) {
  std::unique_ptr<HttpServer> first = StartOrDie(Routes());
  ASSERT_NE(first, nullptr);
  HttpServerOptions o = Routes();
  o.listen = absl::StrCat("127.0.0.1:", first->port());
  absl::StatusOr<std::unique_ptr<HttpServer>> second = HttpServer::Start(o);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(second.status().message(),
            absl::StrCat("cannot listen on 127.0.0.1:", first->port(),
                         " (--test-listen): address already in use"));
}

TEST(HttpServerTest, BadAddressesAreInvalidArgument) {
  for (const char* listen : {"nohost", "127.0.0.1:99999", ":80"}) {
    HttpServerOptions o = Routes();
    o.listen = listen;
    absl::StatusOr<std::unique_ptr<HttpServer>> s = HttpServer::Start(o);
    ASSERT_FALSE(s.ok()) << listen;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()),
                StartsWith("--test-listen: "));
  }
  HttpServerOptions o = Routes();
  o.listen = "no.such.host.invalid:0";
  absl::StatusOr<std::unique_ptr<HttpServer>> s = HttpServer::Start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("does not resolve"));
}

}  // namespace
}  // namespace cohort

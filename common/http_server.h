// A small HTTP/1.1 server for the daemons' read-only endpoints (Prometheus
// /metrics, the coordinator's dashboard and its JSON). No external library.
//
// It answers GET and HEAD for a fixed set of exact paths, each with a
// handler; any other path is 404, any other method on a known path 405.
// Every response carries `Connection: close`, so one connection is one
// request: no keep-alive, pipelining or chunked bodies to get wrong. A
// request whose line and headers exceed max_request_bytes gets 431, one not
// complete within read_timeout 408 (a slow or idle client cannot hold a
// thread for longer than that).
//
// Threads: one accept thread hands connections to a fixed set of connection
// threads through a bounded queue; a connection that finds the queue full
// gets 503 at once. Handlers run on the connection threads, several at a
// time, so they must be thread-safe.
//
// Ownership and thread safety: the server owns its sockets and threads.
// port(), address() and Shutdown() may be called from any thread; the
// destructor shuts down (waits for the running handlers to return, which a
// slow client does not delay: its connection is dropped).
#ifndef COHORT_COMMON_HTTP_SERVER_H_
#define COHORT_COMMON_HTTP_SERVER_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort {

struct HttpRequest {
  std::string method;  // "GET" or "HEAD" (the only ones handlers see)
  std::string path;    // without the query, e.g. "/metrics"
  std::string query;   // after '?', as sent (not decoded); may be empty
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  // HOST:PORT (server/listen.h syntax); port 0 picks a free one.
  std::string listen = "127.0.0.1:0";
  // What the address is, for error messages: "--metrics-listen".
  std::string what = "HTTP server";
  // Exact paths ("/", "/metrics") and their handlers.
  std::map<std::string, HttpHandler> routes;
  // Request line plus headers; more is 431.
  size_t max_request_bytes = 16 * 1024;
  // For the whole request to arrive (from accept); later is 408.
  absl::Duration read_timeout = absl::Seconds(5);
  // For the response to be taken by the client; later, the connection is
  // dropped.
  absl::Duration write_timeout = absl::Seconds(10);
  int connection_threads = 4;
  // Accepted connections waiting for a connection thread; beyond, 503.
  int max_pending = 32;
};

class HttpServer {
 public:
  // Binds and starts serving. INVALID_ARGUMENT for a malformed address or
  // options; UNAVAILABLE "cannot listen on HOST:PORT (WHAT): address
  // already in use" (or the reason the system gave) when it cannot bind.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      HttpServerOptions options);
  ~HttpServer();  // Shutdown
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  std::string address() const;  // HOST:PORT with the bound port

  // Stops accepting, drops queued and unfinished connections, waits for
  // running handlers and joins the threads. Idempotent.
  void Shutdown();

 private:
  HttpServer(HttpServerOptions options, std::string host, int listen_fd,
             int port, int wake_read, int wake_write);
  void AcceptLoop();
  void ConnectionLoop();
  void Serve(int fd);
  HttpResponse Dispatch(const std::string& head, bool* head_only) const;
  bool Reply(int fd, const HttpResponse& response, bool head_only) const;

  const HttpServerOptions options_;
  const std::string host_;
  const int listen_fd_;
  const int port_;
  // A pipe written once by Shutdown and never read: it stays readable, so
  // every thread's poll() wakes on it.
  const int wake_read_;
  const int wake_write_;

  // Serializes Shutdown calls (the joins happen once).
  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<int> pending_ ABSL_GUARDED_BY(mu_);
  std::thread accept_thread_;
  std::vector<std::thread> connection_threads_;
};

}  // namespace cohort

#endif  // COHORT_COMMON_HTTP_SERVER_H_

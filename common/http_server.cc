#include "common/http_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/listen.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

// Binds and listens on the first address `a` resolves to that accepts.
// A port in use fails at once (another address of the same host would
// only hide that).
absl::StatusOr<int> Listen(const ListenAddress& a, const std::string& where) {
  ASSIGN_OR_RETURN(AddrInfoList list, ResolveForListen(a, where));
  int fd = -1;
  int error = 0;
  for (addrinfo* ai = list.get(); ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      error = errno;
      continue;
    }
    // A restarted daemon can take its port back while old connections
    // linger in TIME_WAIT; a live listener still makes bind fail.
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      error = errno;
      close(fd);
      fd = -1;
      if (error == EADDRINUSE) break;
    }
  }
  if (fd >= 0) return fd;
  if (error == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", where, ": the host has no address to bind"));
  }
  return absl::UnavailableError(
      absl::StrCat("cannot listen on ", where, ": ", ErrnoText(error)));
}

int BoundPort(int fd) {
  sockaddr_storage addr = {};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  }
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  }
  return 0;
}

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

HttpResponse Error(int status, absl::string_view detail) {
  HttpResponse r;
  r.status = status;
  r.body = absl::StrCat(status, " ", Reason(status), ": ", detail, "\n");
  return r;
}

std::string Head(const HttpResponse& r) {
  std::string head =
      absl::StrCat("HTTP/1.1 ", r.status, " ", Reason(r.status),
                   "\r\nContent-Type: ", r.content_type,
                   "\r\nContent-Length: ", r.body.size(),
                   "\r\nConnection: close\r\nCache-Control: no-store\r\n");
  if (r.status == 405) absl::StrAppend(&head, "Allow: GET, HEAD\r\n");
  absl::StrAppend(&head, "\r\n");
  return head;
}

int Millis(absl::Duration d) {
  return static_cast<int>(std::clamp<int64_t>(
      absl::ToInt64Milliseconds(d + absl::Microseconds(999)), 0, 1 << 30));
}

// Where the request's headers end (just past the blank line), or npos.
// Bare LF line ends are accepted, as RFC 9112 allows.
size_t HeadEnd(const std::string& buf) {
  const size_t crlf = buf.find("\r\n\r\n");
  const size_t lf = buf.find("\n\n");
  if (crlf == std::string::npos && lf == std::string::npos) {
    return std::string::npos;
  }
  if (lf == std::string::npos || (crlf != std::string::npos && crlf < lf)) {
    return crlf + 4;
  }
  return lf + 2;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    HttpServerOptions options) {
  if (options.connection_threads < 1 || options.max_pending < 1 ||
      options.max_request_bytes < 64 ||
      options.read_timeout <= absl::ZeroDuration() ||
      options.write_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.what,
                     ": connection_threads and max_pending must be at least "
                     "1, max_request_bytes at least 64, timeouts positive"));
  }
  absl::StatusOr<ListenAddress> where = ParseListenAddress(options.listen);
  if (!where.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.what, ": ", where.status().message()));
  }
  const std::string name =
      absl::StrCat(where->host, ":", where->port, " (", options.what, ")");
  absl::StatusOr<int> fd = Listen(*where, name);
  if (!fd.ok()) return fd.status();
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    const int err = errno;
    close(*fd);
    return absl::InternalError(
        absl::StrCat(options.what, ": pipe: ", ErrnoText(err)));
  }
  const int port = BoundPort(*fd);
  return std::unique_ptr<HttpServer>(new HttpServer(
      std::move(options), where->host, *fd, port, wake[0], wake[1]));
}

HttpServer::HttpServer(HttpServerOptions options, std::string host,
                       int listen_fd, int port, int wake_read, int wake_write)
    : options_(std::move(options)),
      host_(std::move(host)),
      listen_fd_(listen_fd),
      port_(port),
      wake_read_(wake_read),
      wake_write_(wake_write) {
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  for (int i = 0; i < options_.connection_threads; ++i) {
    connection_threads_.emplace_back([this] { ConnectionLoop(); });
  }
}

HttpServer::~HttpServer() { Shutdown(); }

std::string HttpServer::address() const {
  return absl::StrCat(host_, ":", port_);
}

void HttpServer::Shutdown() {
  absl::MutexLock shutdown_lock(&shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  const char byte = 0;
  while (write(wake_write_, &byte, 1) < 0 && errno == EINTR) {
  }
  accept_thread_.join();
  for (std::thread& t : connection_threads_) t.join();
  absl::MutexLock lock(&mu_);
  for (int fd : pending_) close(fd);
  pending_.clear();
  close(listen_fd_);
  close(wake_read_);
  close(wake_write_);
}

void HttpServer::AcceptLoop() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) continue;  // EINTR
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors or an aborted connection: let it pass rather
      // than spin on it.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
          errno == ENOMEM) {
        absl::SleepFor(absl::Milliseconds(10));
      }
      continue;
    }
    bool queued = false;
    {
      absl::MutexLock lock(&mu_);
      if (static_cast<int>(pending_.size()) < options_.max_pending) {
        pending_.push_back(fd);
        queued = true;
      }
    }
    if (!queued) {
      // Best effort and without blocking: this thread must keep accepting.
      const std::string busy = [] {
        HttpResponse r = Error(503, "too many connections; retry later");
        return Head(r) + r.body;
      }();
      send(fd, busy.data(), busy.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      close(fd);
    }
  }
}

void HttpServer::ConnectionLoop() {
  while (true) {
    int fd = -1;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](HttpServer* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
            return s->stopping_ || !s->pending_.empty();
          },
          this));
      if (stopping_) return;
      fd = pending_.front();
      pending_.pop_front();
    }
    Serve(fd);
    close(fd);
  }
}

// Reads one request's line and headers (any body is ignored: GET and HEAD
// carry none that matters), answers it and half-closes.
void HttpServer::Serve(int fd) {
  const absl::Time deadline = absl::Now() + options_.read_timeout;
  std::string buf;
  size_t end = std::string::npos;
  char chunk[4096];
  while ((end = HeadEnd(buf)) == std::string::npos) {
    if (buf.size() > options_.max_request_bytes) {
      Reply(fd,
            Error(431, absl::StrCat("the request line and headers exceed ",
                                    options_.max_request_bytes, " bytes")),
            false);
      return;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      Reply(
          fd,
          Error(408, absl::StrCat("the request did not arrive within ",
                                  absl::FormatDuration(options_.read_timeout))),
          false);
      return;
    }
    pollfd fds[2] = {{fd, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    const int ready = poll(fds, 2, Millis(left));
    if (ready < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;  // shutting down
    if (ready <= 0 || fds[0].revents == 0) continue;
    const size_t want =
        std::min(sizeof(chunk), options_.max_request_bytes + 1 - buf.size());
    const ssize_t n = recv(fd, chunk, want, 0);
    if (n == 0) return;  // the client gave up
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return;
    }
    buf.append(chunk, static_cast<size_t>(n));
  }
  if (end > options_.max_request_bytes) {
    Reply(fd,
          Error(431, absl::StrCat("the request line and headers exceed ",
                                  options_.max_request_bytes, " bytes")),
          false);
    return;
  }
  bool head_only = false;
  const HttpResponse response = Dispatch(buf.substr(0, end), &head_only);
  Reply(fd, response, head_only);
}

HttpResponse HttpServer::Dispatch(const std::string& head,
                                  bool* head_only) const {
  const absl::string_view line =
      absl::string_view(head).substr(0, head.find('\n'));
  const std::vector<absl::string_view> parts =
      absl::StrSplit(absl::StripTrailingAsciiWhitespace(line), ' ');
  if (parts.size() != 3 || parts[1].empty() || parts[1][0] != '/') {
    return Error(400, "expected \"METHOD /PATH HTTP/1.x\"");
  }
  if (!absl::StartsWith(parts[2], "HTTP/1.")) {
    return Error(505, absl::StrCat("only HTTP/1.x is served, not ",
                                   parts[2].substr(0, 16)));
  }
  HttpRequest request;
  request.method = std::string(parts[0]);
  const absl::string_view target = parts[1];
  const size_t q = target.find('?');
  request.path = std::string(target.substr(0, q));
  if (q != absl::string_view::npos) {
    request.query = std::string(target.substr(q + 1));
  }
  const auto route = options_.routes.find(request.path);
  if (route == options_.routes.end()) {
    return Error(404, absl::StrCat("no page at ", request.path.substr(0, 200)));
  }
  if (request.method != "GET" && request.method != "HEAD") {
    return Error(405, absl::StrCat(request.path, " answers GET and HEAD, not ",
                                   request.method.substr(0, 16)));
  }
  *head_only = request.method == "HEAD";
  return route->second(request);
}

bool HttpServer::Reply(int fd, const HttpResponse& response,
                       bool head_only) const {
  std::string out = Head(response);
  if (!head_only) out += response.body;
  const absl::Time deadline = absl::Now() + options_.write_timeout;
  size_t sent = 0;
  while (sent < out.size()) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd fds[2] = {{fd, POLLOUT, 0}, {wake_read_, POLLIN, 0}};
    const int ready = poll(fds, 2, Millis(left));
    if (ready < 0 && errno != EINTR) return false;
    if (fds[1].revents != 0) return false;  // shutting down
    if (ready <= 0 || fds[0].revents == 0) continue;
    const ssize_t n = send(fd, out.data() + sent, out.size() - sent,
                           MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return false;
    }
    sent += static_cast<size_t>(n);
  }
  // Closing with unread input would reset the connection, and the client
  // could lose the response (e.g. a 431 sent while it is still writing):
  // half-close, then drain briefly.
  shutdown(fd, SHUT_WR);
  const absl::Time drain_until = absl::Now() + absl::Milliseconds(200);
  char sink[4096];
  for (size_t drained = 0; drained < (1 << 16);) {
    const absl::Duration left = drain_until - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, Millis(left)) <= 0) break;
    const ssize_t n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace cohort

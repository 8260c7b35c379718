#include "common/listen.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

std::string Where(const ListenAddress& a) {
  return absl::StrCat(a.host, ":", a.port);
}

// 0 on success, else the errno of the failed step.
int TryBind(const addrinfo& ai) {
  const int fd = socket(ai.ai_family, ai.ai_socktype, ai.ai_protocol);
  if (fd < 0) return errno;
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const int err = bind(fd, ai.ai_addr, ai.ai_addrlen) == 0 ? 0 : errno;
  close(fd);
  return err;
}

}  // namespace

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text) {
  const size_t colon = text.rfind(':');
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address \"", text, "\" is not HOST:PORT: ", why));
  };
  if (colon == absl::string_view::npos) return bad("no port");
  ListenAddress a;
  a.host = std::string(text.substr(0, colon));
  if (a.host.empty()) {
    return bad("no host (use 0.0.0.0 or [::] for every interface)");
  }
  const bool bracketed = a.host.front() == '[' && a.host.back() == ']';
  if (!bracketed && a.host.find(':') != std::string::npos) {
    return bad("write an IPv6 host in brackets, e.g. [::1]:7000");
  }
  const absl::string_view port = text.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(),
                   [](char c) { return std::isdigit(c); }) ||
      !absl::SimpleAtoi(port, &a.port) || a.port > 65535) {
    return bad("the port must be a number in [0, 65535]");
  }
  return a;
}

std::string ErrnoText(int err) {
  std::string s = std::strerror(err);
  if (!s.empty()) s[0] = absl::ascii_tolower(s[0]);
  return s;
}

absl::StatusOr<AddrInfoList> ResolveForListen(const ListenAddress& a,
                                              absl::string_view where) {
  std::string host = a.host;
  if (host.size() >= 2 && host.front() == '[') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* list = nullptr;
  const std::string port = absl::StrCat(a.port);
  const int gai = getaddrinfo(host.c_str(), port.c_str(), &hints, &list);
  if (gai != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot listen on ", where, ": host \"", a.host,
                     "\" does not resolve (", gai_strerror(gai), ")"));
  }
  return AddrInfoList(list, freeaddrinfo);
}

absl::Status ProbeListen(const ListenAddress& a) {
  ASSIGN_OR_RETURN(AddrInfoList list, ResolveForListen(a, Where(a)));
  int first_error = 0;
  bool bound = false;
  for (addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    const int err = TryBind(*ai);
    if (err == EADDRINUSE) {
      first_error = err;
      bound = false;
      break;
    }
    if (err == 0) bound = true;
    if (err != 0 && first_error == 0) first_error = err;
  }
  if (bound) return absl::OkStatus();
  if (first_error == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", Where(a), ": the host has no address to bind"));
  }
  return absl::UnavailableError(absl::StrCat("cannot listen on ", Where(a),
                                             ": ", ErrnoText(first_error)));
}

}  // namespace cohort

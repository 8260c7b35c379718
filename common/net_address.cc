#include "common/net_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace cohort {
namespace {

// The numeric text of a socket address, without its port.
std::string NumericHost(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = {};
  const void* bytes =
      a.ss_family == AF_INET6
          ? static_cast<const void*>(
                &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr)
          : static_cast<const void*>(
                &reinterpret_cast<const sockaddr_in&>(a).sin_addr);
  if (inet_ntop(a.ss_family, bytes, text, sizeof(text)) == nullptr) return "";
  return text;
}

// The source address of a UDP socket connected to `ai`; "" with `*err` set
// when the kernel has no route.
std::string SourceToward(const addrinfo& ai, int* err) {
  const int fd = socket(ai.ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = errno;
    return "";
  }
  sockaddr_storage local = {};
  socklen_t len = sizeof(local);
  std::string host;
  if (connect(fd, ai.ai_addr, ai.ai_addrlen) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    host = NumericHost(local);
  } else {
    *err = errno;
  }
  close(fd);
  return host;
}

}  // namespace

std::string StripBrackets(absl::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::string(host);
}

std::string JoinHostPort(absl::string_view host, int port) {
  const std::string bare = StripBrackets(host);
  if (bare.find(':') != std::string::npos) {
    return absl::StrCat("[", bare, "]:", port);
  }
  return absl::StrCat(bare, ":", port);
}

std::string HostOfHostPort(absl::string_view host_port) {
  const size_t colon = host_port.rfind(':');
  if (colon == absl::string_view::npos) return "";
  return StripBrackets(host_port.substr(0, colon));
}

bool IsLoopbackHost(absl::string_view host) {
  const std::string bare = StripBrackets(host);
  if (absl::AsciiStrToLower(bare) == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, bare.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, bare.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

bool IsWildcardHost(absl::string_view host) {
  const std::string bare = StripBrackets(host);
  return bare.empty() || bare == "0.0.0.0" || bare == "::";
}

absl::StatusOr<std::string> LocalAddressToward(absl::string_view host_port) {
  const size_t colon = host_port.rfind(':');
  const std::string host = StripBrackets(host_port.substr(0, colon));
  const std::string port = colon == absl::string_view::npos
                               ? "0"
                               : std::string(host_port.substr(colon + 1));
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const int gai = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (gai != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot tell which local address reaches ", host_port,
                     ": ", gai_strerror(gai)));
  }
  int err = 0;
  std::string source;
  for (const addrinfo* ai = found; ai != nullptr && source.empty();
       ai = ai->ai_next) {
    source = SourceToward(*ai, &err);
  }
  freeaddrinfo(found);
  if (source.empty()) {
    return absl::UnavailableError(
        absl::StrCat("cannot tell which local address reaches ", host_port,
                     ": ", err != 0 ? std::strerror(err) : "no address"));
  }
  return source;
}

absl::StatusOr<std::string> DefaultAdvertisedAddress(
    absl::string_view coordinator) {
  absl::StatusOr<std::string> local = LocalAddressToward(coordinator);
  if (!local.ok() || !IsLoopbackHost(*local) ||
      IsLoopbackHost(HostOfHostPort(coordinator))) {
    return local;
  }
  // Any address off this machine leads along the default route; nothing is
  // sent. 192.0.2.1 and 2001:db8::1 are documentation addresses.
  for (const char* outside : {"192.0.2.1:9", "[2001:db8::1]:9"}) {
    absl::StatusOr<std::string> routed = LocalAddressToward(outside);
    if (routed.ok() && !IsLoopbackHost(*routed)) return routed;
  }
  return local;
}

std::string HostOfGrpcPeer(absl::string_view peer) {
  std::string p = absl::StrReplaceAll(peer, {{"%5B", "["}, {"%5D", "]"}});
  absl::string_view rest = p;
  if (!absl::ConsumePrefix(&rest, "ipv4:") &&
      !absl::ConsumePrefix(&rest, "ipv6:")) {
    return "";
  }
  return HostOfHostPort(rest);
}

}  // namespace cohort

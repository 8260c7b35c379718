#include "worker/comm/port_range.h"

#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace cohort {
namespace {

thread_local PortRange t_range;
thread_local bool t_exhausted = false;

using BindFn = int (*)(int, const sockaddr*, socklen_t);

BindFn LibcBind() {
  static const BindFn real = reinterpret_cast<BindFn>(dlsym(RTLD_NEXT, "bind"));
  return real;
}

// The port of an IPv4 or IPv6 address; -1 for other families.
int PortOf(const sockaddr* a, socklen_t len) {
  if (a->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(a)->sin_port);
  }
  if (a->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(a)->sin6_port);
  }
  return -1;
}

void SetPort(sockaddr_storage* a, int port) {
  if (a->ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(a)->sin_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in6*>(a)->sin6_port = htons(port);
  }
}

// Tries the range's ports from a random start; EADDRINUSE when all are
// taken.
int BindInRange(int fd, const sockaddr* addr, socklen_t len) {
  sockaddr_storage copy = {};
  std::memcpy(&copy, addr, len);
  static thread_local std::minstd_rand random(std::random_device{}());
  const int n = t_range.size();
  const int start = static_cast<int>(random() % n);
  for (int i = 0; i < n; ++i) {
    SetPort(&copy, t_range.lo + (start + i) % n);
    if (LibcBind()(fd, reinterpret_cast<sockaddr*>(&copy), len) == 0) return 0;
    if (errno != EADDRINUSE) return -1;
  }
  t_exhausted = true;
  errno = EADDRINUSE;
  return -1;
}

}  // namespace

absl::StatusOr<PortRange> ParsePortRange(absl::string_view text,
                                         absl::string_view flag) {
  if (text.empty()) return PortRange();
  std::vector<absl::string_view> parts = absl::StrSplit(text, '-');
  PortRange r;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &r.lo) ||
      !absl::SimpleAtoi(parts[1], &r.hi) || r.lo < 1 || r.hi > 65535 ||
      r.lo > r.hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", text,
                     " is not LO-HI with 1 <= LO <= HI <= 65535 (for "
                     "example 29500-29599)"));
  }
  return r;
}

PortRangeScope::PortRangeScope(PortRange range)
    : previous_(t_range), previous_exhausted_(t_exhausted) {
  if (!range.empty()) t_range = range;
  t_exhausted = false;
}

PortRangeScope::~PortRangeScope() {
  t_range = previous_;
  t_exhausted = previous_exhausted_;
}

bool PortRangeScope::exhausted() const { return t_exhausted; }

}  // namespace cohort

// Interposes the C library's bind for the whole process (the executable's
// definition comes first in symbol lookup, libgloo's calls included).
// Outside a PortRangeScope, or for a specific port, it is the C library's.
extern "C" int bind(int fd, const sockaddr* addr, socklen_t len) {
  if (cohort::t_range.empty() || addr == nullptr ||
      cohort::PortOf(addr, len) != 0) {
    return cohort::LibcBind()(fd, addr, len);
  }
  return cohort::BindInRange(fd, addr, len);
}

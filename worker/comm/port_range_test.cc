#include "worker/comm/port_range.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "worker/comm/communicator.h"
#include "worker/comm/test_ranks.h"

namespace cohort {
namespace {

TEST(PortRange, Parses) {
  absl::StatusOr<PortRange> r = ParsePortRange("29500-29599", "--p");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->lo, 29500);
  EXPECT_EQ(r->size(), 100);
  EXPECT_TRUE(ParsePortRange("", "--p")->empty());
  for (const char* bad : {"29500", "0-10", "10-5", "1-70000", "a-b", "1-2-3"}) {
    absl::StatusOr<PortRange> b = ParsePortRange(bad, "--collective-ports");
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_TRUE(absl::StrContains(b.status().message(),
                                  std::string("--collective-ports=") + bad))
        << b.status();
  }
}

// The inodes of this process's sockets.
std::set<std::string> OwnSocketInodes() {
  std::set<std::string> inodes;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return inodes;
  while (dirent* e = readdir(dir)) {
    char target[256] = {};
    const std::string path = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
    const std::string t(target, n > 0 ? n : 0);
    if (absl::StartsWith(t, "socket:[")) {
      inodes.insert(t.substr(8, t.size() - 9));
    }
  }
  closedir(dir);
  return inodes;
}

// Local and remote ports of this process's established TCP connections.
std::vector<std::pair<int, int>> OwnConnections() {
  const std::set<std::string> own = OwnSocketInodes();
  std::vector<std::pair<int, int>> out;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout,
          inode;
      f >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >>
          timeout >> inode;
      if (state != "01" || own.count(inode) == 0) continue;  // ESTABLISHED
      int lp = 0, rp = 0;
      absl::SimpleHexAtoi(local.substr(local.rfind(':') + 1), &lp);
      absl::SimpleHexAtoi(remote.substr(remote.rfind(':') + 1), &rp);
      out.emplace_back(lp, rp);
    }
  }
  return out;
}

int RandomBase() {
  std::mt19937 g(std::random_device{}());
  return 40000 + static_cast<int>(g() % 20000);
}

TEST(PortRange, GlooListensOnlyInTheRange) {
  GlooOptions options;
  options.ports = {RandomBase(), 0};
  options.ports.hi = options.ports.lo + 63;
  auto group = LocalGroup::Connect(3, options);
  ASSERT_TRUE(group.ok()) << group.status();
  const auto in_range = [&](int p) {
    return p >= options.ports.lo && p <= options.ports.hi;
  };
  int connections = 0;
  for (const auto& [local, remote] : OwnConnections()) {
    // Both ends are this process's ranks: one end of each connection is the
    // port a rank listened on.
    ++connections;
    EXPECT_TRUE(in_range(local) || in_range(remote))
        << "a connection " << local << " <-> " << remote << " outside "
        << options.ports.lo << "-" << options.ports.hi;
  }
  // 3 pairs, each side's end, over lanes and synchronous lanes.
  EXPECT_GE(connections, 3 * 2 * options.lanes * 2);
}

TEST(PortRange, ARangeTooSmallIsNamed) {
  GlooOptions options;
  options.ports = {RandomBase(), 0};
  options.ports.hi = options.ports.lo;  // one port for six listeners
  options.timeout = absl::Seconds(5);
  auto group = LocalGroup::Connect(3, options);
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().code(), absl::StatusCode::kResourceExhausted)
      << group.status();
  EXPECT_TRUE(absl::StrContains(group.status().message(), "--collective-ports"))
      << group.status();
}

TEST(PortRange, OutsideAScopeBindsAreUntouched) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  EXPECT_GT(ntohs(a.sin_port), 0);
  close(fd);
  {
    PortRangeScope scope({RandomBase(), 0});  // empty range: no change
    EXPECT_FALSE(scope.exhausted());
  }
}

}  // namespace
}  // namespace cohort

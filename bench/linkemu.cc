// A userspace Ethernet switch whose ports are links of a given rate, delay
// and loss, for benchmarks across emulated networks on a kernel without
// sch_netem (tc's netem qdisc), which is what bench/allreduce_netns.sh needs.
//   linkemu --taps=t0,t1[,...] --rate=10g --delay=100us [--loss=0]
//           [--queue=4M] [--mtu=9000]
// Creates one TAP device per name in the current network namespace (the
// caller moves each into its host's namespace and gives it an address; the
// open descriptor follows the device), prints "linkemu: ready" and forwards
// frames between them until SIGINT or SIGTERM, then prints its counters.
// Forwarding learns source MAC addresses and floods unknown destinations,
// like a plain switch. Each port's egress is a link: a frame waits until the
// link has sent the frames before it (rate), then arrives `delay` later (one
// way; a round trip between two hosts is 2 x delay); a frame that would wait
// behind more than --queue bytes is dropped (drop-tail), and any frame is
// dropped with probability --loss. Host-to-host traffic crosses exactly one
// such link, so two hosts see a point-to-point link of that rate and delay.
// Single-threaded; one core at most.
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// "10g", "100m", "1.5k" (bits per second); false unless positive.
bool ParseRate(const std::string& text, double* bits_per_s) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  std::string unit(end);
  double scale = unit.empty() || unit == "bit"   ? 1
                 : unit == "k" || unit == "kbit" ? 1e3
                 : unit == "m" || unit == "mbit" ? 1e6
                 : unit == "g" || unit == "gbit" ? 1e9
                                                 : -1;
  *bits_per_s = value * scale;
  return scale > 0 && *bits_per_s > 0;
}

// "100us", "2ms", "0", "1s" (nanoseconds); false unless >= 0.
bool ParseDuration(const std::string& text, int64_t* ns) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  std::string unit(end);
  double scale = unit == "ns"                  ? 1
                 : unit == "us"                ? 1e3
                 : unit == "ms"                ? 1e6
                 : unit == "s" || unit.empty() ? 1e9
                                               : -1;
  *ns = static_cast<int64_t>(value * scale);
  return scale > 0 && value >= 0;
}

// "4M", "64K", "100000" (bytes).
bool ParseBytes(const std::string& text, int64_t* bytes) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  std::string unit(end);
  double scale = unit.empty()  ? 1
                 : unit == "K" ? 1024
                 : unit == "M" ? 1024 * 1024
                               : -1;
  *bytes = static_cast<int64_t>(value * scale);
  return scale > 0 && *bytes > 0;
}

struct Frame {
  int64_t arrive_ns;  // when it leaves the far end of the link
  std::vector<char> bytes;
};

struct Port {
  std::string name;
  int fd = -1;
  int64_t link_free_ns = 0;  // when the link has sent everything queued
  std::deque<Frame> queue;   // in arrival order (one link, FIFO)
  uint64_t sent = 0, lost = 0, dropped = 0;
};

int OpenTap(const std::string& name, int mtu) {
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  ifreq ifr;
  std::memset(&ifr, 0, sizeof(ifr));
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
  std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name.c_str());
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) {
    close(fd);
    return -1;
  }
  int sock = socket(AF_INET, SOCK_DGRAM, 0);
  if (sock >= 0) {
    ifr.ifr_mtu = mtu;
    if (ioctl(sock, SIOCSIFMTU, &ifr) != 0) {
      std::fprintf(stderr, "linkemu: cannot set MTU %d on %s: %s\n", mtu,
                   name.c_str(), std::strerror(errno));
    }
    close(sock);
  }
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> names;
  double rate = 10e9;
  int64_t delay_ns = 100000, queue_bytes = 4 << 20;
  double loss = 0;
  int mtu = 9000;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      size_t n = std::strlen(flag);
      return arg.compare(0, n, flag) == 0 ? arg.c_str() + n : nullptr;
    };
    bool ok = true;
    if (const char* v = value("--taps=")) {
      std::string list = v;
      for (size_t start = 0; start <= list.size();) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        if (comma > start) names.push_back(list.substr(start, comma - start));
        start = comma + 1;
      }
    } else if (const char* v = value("--rate=")) {
      ok = ParseRate(v, &rate);
    } else if (const char* v = value("--delay=")) {
      ok = ParseDuration(v, &delay_ns);
    } else if (const char* v = value("--loss=")) {
      loss = std::atof(v);
      ok = loss >= 0 && loss < 1;
    } else if (const char* v = value("--queue=")) {
      ok = ParseBytes(v, &queue_bytes);
    } else if (const char* v = value("--mtu=")) {
      mtu = std::atoi(v);
      ok = mtu >= 576 && mtu <= 65535;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "linkemu: bad argument '%s' (usage: linkemu --taps=t0,t1 "
                   "--rate=10g --delay=100us --loss=0 --queue=4M "
                   "--mtu=9000)\n",
                   arg.c_str());
      return 2;
    }
  }
  if (names.size() < 2) {
    std::fprintf(stderr, "linkemu: --taps must name at least two devices\n");
    return 2;
  }
  std::vector<Port> ports(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    ports[i].name = names[i];
    ports[i].fd = OpenTap(names[i], mtu);
    if (ports[i].fd < 0) {
      std::fprintf(stderr,
                   "linkemu: cannot create TAP device %s: %s (needs "
                   "/dev/net/tun and CAP_NET_ADMIN)\n",
                   names[i].c_str(), std::strerror(errno));
      return 1;
    }
  }
  // The default 50 us timer slack would add up to 50 us to every delay.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  std::printf(
      "linkemu: ready: %zu ports, %.3g bit/s, delay %.1f us, loss "
      "%g, queue %lld B, MTU %d\n",
      ports.size(), rate, delay_ns / 1e3, loss,
      static_cast<long long>(queue_bytes), mtu);
  std::fflush(stdout);

  std::mt19937_64 random(12345);
  std::uniform_real_distribution<double> uniform(0, 1);
  std::map<std::string, size_t> where;  // source MAC -> port
  const double ns_per_byte = 8e9 / rate;
  const int64_t queue_ns = static_cast<int64_t>(queue_bytes * ns_per_byte);
  std::vector<pollfd> polls(ports.size());
  std::vector<char> buffer(65536 + 64);

  auto enqueue = [&](size_t to, const char* data, size_t size, int64_t now) {
    Port& port = ports[to];
    if (loss > 0 && uniform(random) < loss) {
      ++port.lost;
      return;
    }
    int64_t start = std::max(now, port.link_free_ns);
    if (start - now > queue_ns) {
      ++port.dropped;
      return;
    }
    // Ethernet's preamble, header and gap: 24 bytes beyond the frame.
    port.link_free_ns = start + static_cast<int64_t>((size + 24) * ns_per_byte);
    port.queue.push_back(Frame{port.link_free_ns + delay_ns,
                               std::vector<char>(data, data + size)});
  };

  while (!g_stop) {
    int64_t now = NowNs();
    // Deliver whatever has crossed its link.
    int64_t next = -1;
    for (Port& port : ports) {
      while (!port.queue.empty() && port.queue.front().arrive_ns <= now) {
        const Frame& frame = port.queue.front();
        if (write(port.fd, frame.bytes.data(), frame.bytes.size()) < 0) {
          ++port.dropped;
        } else {
          ++port.sent;
        }
        port.queue.pop_front();
      }
      if (!port.queue.empty() &&
          (next < 0 || port.queue.front().arrive_ns < next)) {
        next = port.queue.front().arrive_ns;
      }
    }
    for (size_t i = 0; i < ports.size(); ++i) {
      polls[i] = {ports[i].fd, POLLIN, 0};
    }
    timespec timeout{1, 0};
    if (next >= 0) {
      int64_t wait = std::max<int64_t>(0, next - now);
      timeout = {static_cast<time_t>(wait / 1000000000),
                 static_cast<long>(wait % 1000000000)};
    }
    int ready = ppoll(polls.data(), polls.size(), &timeout, nullptr);
    if (ready <= 0) continue;
    now = NowNs();
    for (size_t i = 0; i < ports.size(); ++i) {
      if (!(polls[i].revents & POLLIN)) continue;
      for (int burst = 0; burst < 64; ++burst) {
        ssize_t n = read(ports[i].fd, buffer.data(), buffer.size());
        if (n < 14) break;
        const char* frame = buffer.data();
        where[std::string(frame + 6, 6)] = i;
        bool broadcast = (frame[0] & 1) != 0;
        auto known =
            broadcast ? where.end() : where.find(std::string(frame, 6));
        if (known != where.end()) {
          if (known->second != i) enqueue(known->second, frame, n, now);
        } else {
          for (size_t to = 0; to < ports.size(); ++to) {
            if (to != i) enqueue(to, frame, n, now);
          }
        }
      }
    }
  }
  for (const Port& port : ports) {
    std::printf(
        "linkemu: %s: %llu frames delivered, %llu lost (--loss), "
        "%llu dropped (queue full)\n",
        port.name.c_str(), static_cast<unsigned long long>(port.sent),
        static_cast<unsigned long long>(port.lost),
        static_cast<unsigned long long>(port.dropped));
  }
  return 0;
}

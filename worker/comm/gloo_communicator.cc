// The Gloo implementation of Communicator (declared in communicator.h).
//
// Gloo's "old-style" algorithm classes are used because they are the ones
// that offer every algorithm we expose; each instance binds one buffer and
// owns scratch space as large as it, so plans keep instances alive across
// steps. Each lane is its own Gloo context (a full mesh of connections) over
// one shared TCP device: consecutive all-reduces of Gloo on one context leave
// the wire idle between them, which two lanes fill. Gloo reports errors by
// throwing; nothing thrown escapes this file.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "gloo/algorithm.h"
#include "gloo/allreduce_bcube.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/barrier.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/tcp/pair.h"
#include "worker/comm/communicator.h"
#include "worker/comm/direct_allreduce.h"
#include "worker/comm/gloo_diagnostics.h"
#include "worker/comm/half_words.h"
#include "worker/comm/port_range.h"

namespace cohort {
namespace {

enum class AlgorithmKind { kRing, kRingChunked, kHalvingDoubling, kBcube };

constexpr std::pair<const char*, AlgorithmKind> kAlgorithms[] = {
    {"ring", AlgorithmKind::kRing},
    {"ring_chunked", AlgorithmKind::kRingChunked},
    {"halving_doubling", AlgorithmKind::kHalvingDoubling},
    {"bcube", AlgorithmKind::kBcube},
};

constexpr int kMaxLanes = 8;

// Gloo counts elements in int, and bcube even counts bytes in int, so larger
// buffers are reduced in pieces of at most 1 GiB.
constexpr int64_t kMaxElementsPerOp = int64_t{1} << 28;

// How long the destructor waits for peers to finish their last collective.
constexpr absl::Duration kQuiesceLimit = absl::Seconds(5);

// Gloo's bcube gives wrong sums (no error) unless the world size is a power
// of the context's base, so the base is chosen per world size.
int BcubeBase(int size) {
  for (int base = 2; base < size; ++base) {
    int power = base;
    while (power < size) power *= base;
    if (power == size) return base;
  }
  return std::max(size, 2);
}

using Context = gloo::rendezvous::Context;
using Ops = std::vector<std::unique_ptr<gloo::Algorithm>>;

// The sockets under a communicator's Gloo TCP pairs. Gloo offers no way to
// interrupt a thread blocked in one of its collectives:
// Context::closeConnections needs the pair's lock, which a synchronous
// receive holds while it waits in recv(2), so a thread waiting on a silent
// peer waits out the whole timeout. shutdown(2) on the socket ends the wait
// at once (recv sees end of file; the event loop sees the hang-up) and,
// unlike close(2), leaves the descriptor to Gloo. The descriptor is a
// protected member of Gloo's pair; naming it through a derived class is the
// language's way to read it without changing Gloo.
struct PairSocket : gloo::transport::tcp::Pair {
  // -1 unless `pair` is a TCP pair.
  static int Of(gloo::transport::Pair* pair) {
    auto* tcp = dynamic_cast<gloo::transport::tcp::Pair*>(pair);
    return tcp == nullptr ? -1 : tcp->*(&PairSocket::fd_);
  }
};

// Duplicates of the connected sockets of every pair in `contexts` (the
// caller closes them), or an empty list when one of them is not a
// connected TCP socket: a Gloo whose pair differs from the header this was
// compiled against must not make Abort shut down descriptors that belong
// to someone else. Duplicates, because Gloo closes a pair's descriptor when
// the pair fails, after which its number may name another file; a
// duplicate names the same socket until it is closed.
std::vector<int> PairSockets(
    const std::vector<const std::vector<std::shared_ptr<Context>>*>& contexts) {
  std::vector<int> fds;
  for (const auto* lanes : contexts) {
    for (const auto& lane : *lanes) {
      for (int peer = 0; peer < lane->size; ++peer) {
        if (peer == lane->rank) continue;
        const int fd = PairSocket::Of(lane->getPair(peer).get());
        int type = 0;
        socklen_t type_size = sizeof(type);
        sockaddr_storage addr;
        socklen_t addr_size = sizeof(addr);
        if (fd < 0 ||
            getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_size) != 0 ||
            type != SOCK_STREAM ||
            getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &addr_size) !=
                0) {
          return {};
        }
        fds.push_back(fd);
      }
    }
  }
  std::vector<int> sorted = fds;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return {};
  }
  std::vector<int> copies;
  for (int fd : fds) {
    const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) break;
    copies.push_back(copy);
  }
  if (copies.size() != fds.size()) {
    for (int copy : copies) close(copy);
    return {};
  }
  return copies;
}

class GlooCommunicator;

class GlooPlan : public AllReducePlan {
 public:
  GlooPlan(GlooCommunicator* comm, int64_t count, Ops ops)
      : comm_(comm), count_(count), ops_(std::move(ops)) {}
  absl::Status Run() override;

 private:
  GlooCommunicator* const comm_;
  const int64_t count_;
  Ops ops_;
};

// All-reduces up to this size run on the synchronous lanes (see
// PlanAllReduceSum); larger ones on Gloo's event loop, which overlaps
// sending with receiving and was faster from 64 MiB up over loopback
// (docs/BENCHMARKS.md).
constexpr int64_t kSyncMaxBytes = int64_t{16} << 20;

// A synchronous send returns once the kernel holds the whole message, and
// every rank sends before it receives, so no message may exceed the socket's
// send buffer, or all ranks block in send for good (25 MiB buckets did).
// Gloo sizes that buffer to the message, up to net.core.wmem_max, and a
// message is at most one whole operation, so synchronous all-reduces run in
// pieces of at most min(4 MiB, wmem_max), agreed on by all ranks.
constexpr int64_t kSyncPieceBytes = int64_t{4} << 20;

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(std::vector<std::shared_ptr<Context>> lanes,
                   std::vector<std::shared_ptr<Context>> sync_lanes,
                   int64_t sync_piece_bytes, AlgorithmKind algorithm,
                   const GlooOptions& options, PeerNames peers)
      : lanes_(std::move(lanes)),
        sync_lanes_(std::move(sync_lanes)),
        sync_piece_bytes_(sync_piece_bytes),
        algorithm_(algorithm),
        options_(options),
        peers_(std::move(peers)),
        sockets_(PairSockets({&lanes_, &sync_lanes_})) {}
  ~GlooCommunicator() override;

  int rank() const override { return lanes_[0]->rank; }
  int size() const override { return lanes_[0]->size; }
  int lanes() const override { return static_cast<int>(lanes_.size()); }

  absl::Status AllReduceSum(float* data, int64_t count) override {
    ASSIGN_OR_RETURN(std::unique_ptr<AllReducePlan> plan,
                     PlanAllReduceSum(data, count, /*lane=*/0));
    return plan->Run();
  }

  absl::StatusOr<std::unique_ptr<AllReducePlan>> PlanAllReduceSum(
      float* data, int64_t count, int lane) override;
  absl::StatusOr<std::unique_ptr<AllReducePlan>> PlanAllReduceSum16(
      uint16_t* data, int64_t count, int lane, HalfFormat format) override;

  absl::Status RunOps(const Ops& ops, int64_t count);
  void Abort(const absl::Status& why) override;

 private:
  template <typename T>
  absl::StatusOr<std::unique_ptr<AllReducePlan>> PlanOps(
      T* data, int64_t count, int lane, const gloo::ReductionFunction<T>* sum);
  absl::Status broken() const {
    absl::MutexLock lock(&mu_);
    return broken_;
  }
  // Marks the communicator broken with a status describing `e`.
  absl::Status Fail(const std::exception& e, int64_t count);
  void CloseConnections();
  // Shuts down every pair's socket (see PairSocket); safe from any thread
  // while the communicator lives.
  void ShutdownSockets();
  // Ends every pair: shuts the sockets down, or where they are unknown
  // closes Gloo's connections (which cannot wake a waiting collective).
  void HangUp();
  // Waits (boundedly) until no peer is inside its last collective.
  void Quiesce();

  const std::vector<std::shared_ptr<Context>> lanes_;
  // Synchronous pairs for small all-reduces, one context per lane (empty
  // with one rank); see
  // PlanAllReduceSum. A synchronous pair is read by whichever thread waits
  // on it, so two lanes sharing one would steal each other's messages.
  const std::vector<std::shared_ptr<Context>> sync_lanes_;
  // Bytes per synchronous operation (see kSyncPieceBytes).
  const int64_t sync_piece_bytes_;
  const AlgorithmKind algorithm_;
  const GlooOptions options_;
  const PeerNames peers_;
  // Duplicates of every pair's socket, taken once connected (PairSockets)
  // and closed by the destructor; empty when they could not be identified,
  // and Abort then cannot interrupt a collective that is already waiting.
  const std::vector<int> sockets_;
  mutable absl::Mutex mu_;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
};

absl::Status GlooPlan::Run() { return comm_->RunOps(ops_, count_); }

GlooCommunicator::~GlooCommunicator() {
  Quiesce();
  // The contexts, destroyed after this, close the sockets for good.
  for (int fd : sockets_) close(fd);
}

void GlooCommunicator::Quiesce() {
  if (!broken().ok() || size() == 1) return;
  // Gloo fails a pending receive as soon as its peer's socket closes, even
  // when the data has already arrived. A barrier first makes sure no peer is
  // still inside its last collective when this rank hangs up; its own failure
  // (a faster peer hanging up first) is harmless and ignored.
  try {
    gloo::BarrierOptions barrier(lanes_[0]);
    barrier.setTimeout(
        absl::ToChronoMilliseconds(std::min(options_.timeout, kQuiesceLimit)));
    gloo::barrier(barrier);
  } catch (const std::exception&) {
  }
}

template <typename T>
std::unique_ptr<gloo::Algorithm> MakeGlooOp(
    const std::shared_ptr<gloo::Context>& context, AlgorithmKind algorithm,
    T* data, int count, bool direct, const gloo::ReductionFunction<T>* sum) {
  if (direct) {
    return std::make_unique<DirectAllreduceOf<T>>(context, data, count, sum);
  }
  const std::vector<T*> ptrs = {data};
  switch (algorithm) {
    case AlgorithmKind::kRing:
      return std::make_unique<gloo::AllreduceRing<T>>(context, ptrs, count,
                                                      sum);
    case AlgorithmKind::kRingChunked:
      return std::make_unique<gloo::AllreduceRingChunked<T>>(context, ptrs,
                                                             count, sum);
    case AlgorithmKind::kHalvingDoubling:
      return std::make_unique<gloo::AllreduceHalvingDoubling<T>>(context, ptrs,
                                                                 count, sum);
    case AlgorithmKind::kBcube:
      return std::make_unique<gloo::AllreduceBcube<T>>(context, ptrs, count,
                                                       sum);
  }
  return nullptr;
}

absl::StatusOr<std::unique_ptr<AllReducePlan>>
GlooCommunicator::PlanAllReduceSum(float* data, int64_t count, int lane) {
  return PlanOps(data, count, lane, gloo::ReductionFunction<float>::sum);
}

absl::StatusOr<std::unique_ptr<AllReducePlan>>
GlooCommunicator::PlanAllReduceSum16(uint16_t* data, int64_t count, int lane,
                                     HalfFormat format) {
  if (format == HalfFormat::kFp16) {
    return PlanOps(reinterpret_cast<Fp16Word*>(data), count, lane, Fp16Sum());
  }
  return PlanOps(reinterpret_cast<Bf16Word*>(data), count, lane, Bf16Sum());
}

template <typename T>
absl::StatusOr<std::unique_ptr<AllReducePlan>> GlooCommunicator::PlanOps(
    T* data, int64_t count, int lane, const gloo::ReductionFunction<T>* sum) {
  CHECK_GE(count, 0) << "all-reduce of a negative count";
  CHECK(data != nullptr || count == 0) << "all-reduce of a null buffer";
  CHECK(lane >= 0 && lane < lanes()) << "no lane " << lane;
  RETURN_IF_ERROR(broken());
  // All-reduces up to kSyncMaxBytes go to this lane's synchronous twin,
  // which sends and receives in the calling thread: Gloo's event loop hands
  // every message to and from its own thread, which costs more than the
  // transfer itself up to several MiB on the 2-core CI machine. Every rank
  // picks the same context and pieces, since they depend on the count, the
  // lane and agreed constants alone.
  const int64_t bytes = count * int64_t{sizeof(T)};
  const bool sync = !sync_lanes_.empty() && bytes <= kSyncMaxBytes;
  const std::shared_ptr<Context>& context =
      sync ? sync_lanes_[lane] : lanes_[lane];
  const int64_t piece =
      sync ? sync_piece_bytes_ / int64_t{sizeof(T)} : kMaxElementsPerOp;
  const bool direct = sync && UseDirect(size(), bytes);
  Ops ops;
  try {
    for (int64_t start = 0; start < count; start += piece) {
      const int64_t n = std::min(piece, count - start);
      ops.push_back(MakeGlooOp<T>(context, algorithm_, data + start,
                                  static_cast<int>(n), direct, sum));
    }
  } catch (const std::exception& e) {
    return Fail(e, count);
  }
  // Gloo signals a failure only to the buffers that exist when a pair
  // fails; a buffer created on an already failed pair would wait out the
  // whole timeout. Abort marks the communicator broken before it shuts the
  // sockets down, so this check sees any abort that could have closed a
  // pair while the operations were being built.
  RETURN_IF_ERROR(broken());
  return std::unique_ptr<AllReducePlan>(
      new GlooPlan(this, count, std::move(ops)));
}

absl::Status GlooCommunicator::RunOps(const Ops& ops, int64_t count) {
  RETURN_IF_ERROR(broken());
  try {
    for (const auto& op : ops) op->run();
  } catch (const std::exception& e) {
    return Fail(e, count);
  }
  return absl::OkStatus();
}

void GlooCommunicator::Abort(const absl::Status& why) {
  {
    absl::MutexLock lock(&mu_);
    if (!broken_.ok()) return;
    broken_ = why.ok() ? absl::AbortedError("aborted") : why;
  }
  // Abort may come from another thread (the heartbeat's, on the
  // coordinator's verdict) while a collective blocks on a silent peer.
  HangUp();
}

void GlooCommunicator::HangUp() {
  if (sockets_.empty()) {
    CloseConnections();
    return;
  }
  // Not closeConnections as well: a pair closed that way is taken out of
  // Gloo's event loop before the loop has read the end of file, and then
  // never tells the buffers waiting on it, which wait out the timeout.
  ShutdownSockets();
}

void GlooCommunicator::ShutdownSockets() {
  for (int fd : sockets_) ::shutdown(fd, SHUT_RDWR);
}

void GlooCommunicator::CloseConnections() {
  for (const auto* contexts : {&lanes_, &sync_lanes_}) {
    for (const auto& lane : *contexts) {
      try {
        lane->closeConnections();
      } catch (const std::exception&) {
      }
    }
  }
}

absl::Status GlooCommunicator::Fail(const std::exception& e, int64_t count) {
  CollectiveInfo info;
  info.algorithm = options_.algorithm;
  info.ring = algorithm_ == AlgorithmKind::kRing ||
              algorithm_ == AlgorithmKind::kRingChunked;
  info.rank = rank();
  info.size = size();
  info.count = count;
  info.timeout = options_.timeout;
  absl::Status status =
      DescribeCollectiveFailure(StripGlooLocation(e.what()), info, peers_);
  {
    absl::MutexLock lock(&mu_);
    if (!broken_.ok()) return broken_;  // another lane failed first
    broken_ = status;
  }
  // Peers (and our other lanes) blocked on this rank now fail at once
  // instead of at their timeout; our duplicates would otherwise keep the
  // sockets open after Gloo closes them.
  HangUp();
  return status;
}

absl::Status ValidateOptions(int rank, int size, const GlooOptions& options,
                             AlgorithmKind* algorithm) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gloo rank ", rank, " of world size ", size,
                     " is out of range (want 0 <= rank < size, size >= 1)"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gloo timeout must be positive, got ",
                     absl::FormatDuration(options.timeout)));
  }
  if (options.lanes < 1 || options.lanes > kMaxLanes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Gloo lanes must be in [1, ", kMaxLanes, "], got ", options.lanes));
  }
  std::vector<std::string> known;
  for (const auto& [name, value] : kAlgorithms) {
    if (options.algorithm == name) {
      *algorithm = value;
      return absl::OkStatus();
    }
    known.push_back(name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown all-reduce algorithm '", options.algorithm,
                   "' (known: ", absl::StrJoin(known, ", "), ")"));
}

// Gloo writes to its sockets with writev(2), so a peer that dies mid-write
// would raise SIGPIPE and kill this process without a word. Ignoring it
// turns that into EPIPE, which fails the collective with a clear error. A
// handler someone else installed is left alone.
void IgnoreSigpipe() {
  struct sigaction current = {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 &&
      current.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
}

// The CPUs this process may run on (its affinity mask, which containers and
// taskset narrow), at least 1.
int AvailableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    return std::max(1u, std::thread::hardware_concurrency());
  }
  return std::max(1, CPU_COUNT(&set));
}

bool SpinWhileWaiting(const GlooOptions& options, int local_ranks) {
  switch (options.wait) {
    case GlooOptions::Wait::kSpin:
      return true;
    case GlooOptions::Wait::kBlock:
      return false;
    case GlooOptions::Wait::kAuto:
      break;
  }
  return static_cast<int64_t>(local_ranks) * options.cores_per_rank <=
         AvailableCores();
}

// This host's largest socket send buffer (net.core.wmem_max), or Linux's
// smallest default where it cannot be read.
int64_t MaxSendBufferBytes() {
  int64_t bytes = 0;
  if (FILE* f = std::fopen("/proc/sys/net/core/wmem_max", "r")) {
    if (std::fscanf(f, "%" SCNd64, &bytes) != 1) bytes = 0;
    std::fclose(f);
  }
  return bytes > 0 ? bytes : 212992;
}

// Learns the addresses by which Gloo's messages name peers: each rank
// publishes its per-pair addresses (Gloo binds both ends of a connection to
// them) through the store, followed by its synchronous piece size, and
// lowers *piece_bytes to the smallest any rank published. Throws as the
// store does.
void ExchangeWithPeers(gloo::rendezvous::Store& store, Context& context,
                       PeerNames* peers, int64_t* piece_bytes) {
  std::vector<std::string> mine(context.size);
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer != context.rank) {
      mine[peer] = context.getPair(peer)->address().str();
    }
  }
  mine.push_back(absl::StrCat(*piece_bytes));
  std::string joined = absl::StrJoin(mine, "\n");
  store.set(absl::StrCat("cohort_addresses_", context.rank),
            std::vector<char>(joined.begin(), joined.end()));
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer == context.rank) continue;
    std::vector<char> bytes =
        store.get(absl::StrCat("cohort_addresses_", peer));
    std::vector<std::string> theirs =
        absl::StrSplit(std::string(bytes.begin(), bytes.end()), '\n');
    if (context.rank < static_cast<int>(theirs.size())) {
      peers->Add(theirs[context.rank], peer);
    }
    int64_t their_piece = 0;
    if (theirs.size() == static_cast<size_t>(context.size) + 1 &&
        absl::SimpleAtoi(theirs.back(), &their_piece) && their_piece > 0) {
      *piece_bytes = std::min(*piece_bytes, their_piece);
    }
  }
}

// Lane 0 rendezvouses on the store's own keys (so that a missing rank is
// named by its number), later lanes under a prefix. Throws as Gloo does.
std::shared_ptr<Context> ConnectLane(
    gloo::rendezvous::Store& store, int lane, int rank, int size,
    const GlooOptions& options,
    std::shared_ptr<gloo::transport::Device>& device, PeerNames* peers,
    int64_t* piece_bytes) {
  auto context = std::make_shared<Context>(rank, size, BcubeBase(size));
  context->setTimeout(absl::ToChronoMilliseconds(options.timeout));
  if (lane == 0) {
    context->connectFullMesh(store, device);
    ExchangeWithPeers(store, *context, peers, piece_bytes);
  } else {
    gloo::rendezvous::PrefixStore prefixed(absl::StrCat("lane", lane), store);
    context->connectFullMesh(prefixed, device);
    ExchangeWithPeers(prefixed, *context, peers, piece_bytes);
  }
  return context;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    gloo::rendezvous::Store& store, int rank, int size,
    const GlooOptions& options) {
  AlgorithmKind algorithm = AlgorithmKind::kRingChunked;
  RETURN_IF_ERROR(ValidateOptions(rank, size, options, &algorithm));
  IgnoreSigpipe();
  std::shared_ptr<gloo::transport::Device> device;
  try {
    gloo::transport::tcp::attr attr(options.hostname.c_str());
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot listen for Gloo peers on host '", options.hostname,
                     "': ", StripGlooLocation(e.what())));
  }
  // One rank alone has nothing to overlap.
  const int lanes = size == 1 ? 1 : options.lanes;
  std::vector<std::shared_ptr<Context>> contexts;
  std::vector<std::shared_ptr<Context>> sync_lanes;
  PeerNames peers;
  // Rounded down to whole floats; every rank rounds the same agreed value.
  int64_t piece_bytes = std::min(kSyncPieceBytes, MaxSendBufferBytes());
  PortRangeScope ports(options.ports);
  ConnectAbort::Scope abortable(options.abort);
  if (options.abort != nullptr) RETURN_IF_ERROR(options.abort->status());
  try {
    for (int lane = 0; lane < lanes; ++lane) {
      contexts.push_back(ConnectLane(store, lane, rank, size, options, device,
                                     &peers, &piece_bytes));
    }
    if (size > 1) {
      const bool spin = SpinWhileWaiting(
          options,
          1 + peers.RanksOnHost(HostOf(
                  contexts[0]->getPair((rank + 1) % size)->address().str())));
      for (int lane = 0; lane < lanes; ++lane) {
        sync_lanes.push_back(ConnectLane(store, lanes + lane, rank, size,
                                         options, device, &peers,
                                         &piece_bytes));
        for (int peer = 0; peer < size; ++peer) {
          if (peer != rank) {
            sync_lanes.back()->getPair(peer)->setSync(true, spin);
          }
        }
      }
    }
  } catch (const std::exception& e) {
    if (options.abort != nullptr) RETURN_IF_ERROR(options.abort->status());
    if (ports.exhausted()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "rank ", rank, " of ", size,
          " found no free port in the collective "
          "port range ",
          options.ports.lo, "-", options.ports.hi,
          " (--collective-ports): it listens on one port per peer (", size - 1,
          " at once) while connecting; widen the range"));
    }
    return DescribeRendezvousFailure(store, e, rank, size);
  }
  GlooOptions kept = options;
  kept.abort = nullptr;  // the connect is over; the caller's object may go
  return std::unique_ptr<Communicator>(
      new GlooCommunicator(std::move(contexts), std::move(sync_lanes),
                           piece_bytes, algorithm, kept, std::move(peers)));
}

}  // namespace cohort

// The Gloo implementation of Communicator (declared in communicator.h).
//
// Gloo's "old-style" algorithm classes are used because they are the ones
// that offer every algorithm we expose; each instance binds one buffer and
// owns scratch space as large as it, so plans keep instances alive across
// steps. Gloo reports errors by throwing; nothing thrown escapes this file.
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "gloo/algorithm.h"
#include "gloo/allreduce_bcube.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/barrier.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"
#include "worker/comm/communicator.h"
#include "worker/comm/gloo_store.h"

namespace cohort {
namespace {

enum class AlgorithmKind { kRing, kRingChunked, kHalvingDoubling, kBcube };

constexpr std::pair<const char*, AlgorithmKind> kAlgorithms[] = {
    {"ring", AlgorithmKind::kRing},
    {"ring_chunked", AlgorithmKind::kRingChunked},
    {"halving_doubling", AlgorithmKind::kHalvingDoubling},
    {"bcube", AlgorithmKind::kBcube},
};

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

// Gloo prefixes messages with "[file:line] ", which means nothing to users.
std::string StripLocation(const std::string& what) {
  if (!what.empty() && what[0] == '[') {
    size_t end = what.find("] ");
    if (end != std::string::npos) return what.substr(end + 2);
  }
  return what;
}

// The IP part of a Gloo address string ("[10.0.0.5]:41234" -> "10.0.0.5").
std::string HostOf(const std::string& address) {
  size_t open = address.find('[');
  size_t close = address.find(']', open);
  if (open == std::string::npos || close == std::string::npos) return "";
  return address.substr(open + 1, close - open - 1);
}

// The first "[host]:port" in a Gloo error message, or "".
std::string AddressIn(const std::string& what) {
  size_t open = what.find('[');
  while (open != std::string::npos) {
    size_t close = what.find("]:", open);
    if (close == std::string::npos) return "";
    size_t end = close + 2;
    while (end < what.size() &&
           isdigit(static_cast<unsigned char>(what[end]))) {
      ++end;
    }
    if (end > close + 2) return what.substr(open, end - open);
    open = what.find('[', close);
  }
  return "";
}

class GlooCommunicator;

class GlooPlan : public AllReducePlan {
 public:
  GlooPlan(GlooCommunicator* comm, int64_t count,
           std::vector<std::unique_ptr<gloo::Algorithm>> ops)
      : comm_(comm), count_(count), ops_(std::move(ops)) {}
  absl::Status Run() override;

 private:
  GlooCommunicator* const comm_;
  const int64_t count_;
  std::vector<std::unique_ptr<gloo::Algorithm>> ops_;
};

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::rendezvous::Context> context,
                   AlgorithmKind algorithm, std::string algorithm_name,
                   absl::Duration timeout,
                   std::map<std::string, int> peer_by_address)
      : context_(std::move(context)),
        algorithm_(algorithm),
        algorithm_name_(std::move(algorithm_name)),
        timeout_(timeout),
        peer_by_address_(std::move(peer_by_address)) {}
  ~GlooCommunicator() override;

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }

  absl::Status AllReduceSum(float* data, int64_t count) override {
    ASSIGN_OR_RETURN(std::unique_ptr<AllReducePlan> plan,
                     PlanAllReduceSum(data, count));
    return plan->Run();
  }

  absl::StatusOr<std::unique_ptr<AllReducePlan>> PlanAllReduceSum(
      float* data, int64_t count) override;

  absl::Status RunOps(const std::vector<std::unique_ptr<gloo::Algorithm>>& ops,
                      int64_t count);

 private:
  std::unique_ptr<gloo::Algorithm> MakeOp(float* data, int count);
  // Marks the communicator broken with a status describing `e`.
  absl::Status Fail(const std::exception& e, int64_t count);
  absl::Status Describe(const std::string& what, int64_t count) const;
  // "rank k" when `what` names the socket address of one of our peers.
  std::string PeerNamedIn(const std::string& what) const;

  std::shared_ptr<gloo::rendezvous::Context> context_;
  const AlgorithmKind algorithm_;
  const std::string algorithm_name_;
  const absl::Duration timeout_;
  // Every socket address by which Gloo's messages may name a peer rank.
  const std::map<std::string, int> peer_by_address_;
  absl::Status broken_;
};

absl::Status GlooPlan::Run() { return comm_->RunOps(ops_, count_); }

GlooCommunicator::~GlooCommunicator() {
  if (!broken_.ok() || size() == 1) return;
  // Gloo fails a pending receive as soon as its peer's socket closes, even
  // when the data has already arrived. A barrier first makes sure no peer is
  // still inside its last collective when this rank hangs up; its own failure
  // (a faster peer hanging up first) is harmless and ignored.
  try {
    gloo::BarrierOptions options(context_);
    options.setTimeout(
        absl::ToChronoMilliseconds(std::min(timeout_, kQuiesceLimit)));
    gloo::barrier(options);
  } catch (const std::exception&) {
  }
}

std::unique_ptr<gloo::Algorithm> GlooCommunicator::MakeOp(float* data,
                                                          int count) {
  const std::vector<float*> ptrs = {data};
  switch (algorithm_) {
    case AlgorithmKind::kRing:
      return std::make_unique<gloo::AllreduceRing<float>>(context_, ptrs,
                                                          count);
    case AlgorithmKind::kRingChunked:
      return std::make_unique<gloo::AllreduceRingChunked<float>>(context_, ptrs,
                                                                 count);
    case AlgorithmKind::kHalvingDoubling:
      return std::make_unique<gloo::AllreduceHalvingDoubling<float>>(
          context_, ptrs, count);
    case AlgorithmKind::kBcube:
      return std::make_unique<gloo::AllreduceBcube<float>>(context_, ptrs,
                                                           count);
  }
  return nullptr;
}

absl::StatusOr<std::unique_ptr<AllReducePlan>>
GlooCommunicator::PlanAllReduceSum(float* data, int64_t count) {
  CHECK_GE(count, 0) << "all-reduce of a negative count";
  CHECK(data != nullptr || count == 0) << "all-reduce of a null buffer";
  if (!broken_.ok()) return broken_;
  std::vector<std::unique_ptr<gloo::Algorithm>> ops;
  try {
    for (int64_t start = 0; start < count; start += kMaxElementsPerOp) {
      int64_t n = std::min(kMaxElementsPerOp, count - start);
      ops.push_back(MakeOp(data + start, static_cast<int>(n)));
    }
  } catch (const std::exception& e) {
    return Fail(e, count);
  }
  return std::unique_ptr<AllReducePlan>(
      new GlooPlan(this, count, std::move(ops)));
}

absl::Status GlooCommunicator::RunOps(
    const std::vector<std::unique_ptr<gloo::Algorithm>>& ops, int64_t count) {
  if (!broken_.ok()) return broken_;
  try {
    for (const auto& op : ops) op->run();
  } catch (const std::exception& e) {
    return Fail(e, count);
  }
  return absl::OkStatus();
}

absl::Status GlooCommunicator::Fail(const std::exception& e, int64_t count) {
  broken_ = Describe(StripLocation(e.what()), count);
  // Peers blocked on this rank now fail at once instead of at their timeout.
  try {
    context_->closeConnections();
  } catch (const std::exception&) {
  }
  return broken_;
}

std::string GlooCommunicator::PeerNamedIn(const std::string& what) const {
  std::string address = AddressIn(what);
  if (address.empty()) return "";
  auto it = peer_by_address_.find(address);
  if (it != peer_by_address_.end()) return absl::StrCat("rank ", it->second);
  // Unknown port: the host still identifies the peer, if only one is there.
  std::set<int> same_host;
  for (const auto& [known, peer] : peer_by_address_) {
    if (HostOf(known) == HostOf(address)) same_host.insert(peer);
  }
  if (same_host.size() == 1) return absl::StrCat("rank ", *same_host.begin());
  if (same_host.empty()) return address;
  return absl::StrCat("one of ranks ", absl::StrJoin(same_host, ", "), " at ",
                      HostOf(address));
}

absl::Status GlooCommunicator::Describe(const std::string& what,
                                        int64_t count) const {
  std::string head =
      absl::StrCat("all-reduce of ", count, " floats (", algorithm_name_,
                   ") failed on rank ", rank(), " of ", size(), ": ");
  std::string peer = PeerNamedIn(what);
  bool timed_out = what.find("Timed out") != std::string::npos ||
                   what.find("timeout") != std::string::npos;
  if (!timed_out) {
    if (peer.empty()) return absl::UnavailableError(absl::StrCat(head, what));
    return absl::UnavailableError(
        absl::StrCat(head, "lost the connection to ", peer,
                     " (it failed or exited): ", what));
  }
  bool ambiguous = peer.empty() || peer.rfind("one of", 0) == 0;
  if (ambiguous && (algorithm_ == AlgorithmKind::kRing ||
                    algorithm_ == AlgorithmKind::kRingChunked)) {
    // A ring receives only from its left neighbour and sends only right.
    bool send = what.find("send") != std::string::npos ||
                what.find("Write") != std::string::npos;
    peer = absl::StrCat("rank ", (rank() + (send ? 1 : size() - 1)) % size());
  }
  std::string waiting =
      peer.empty() ? "a peer"
                   : absl::StrCat(peer, " (it, or a rank it waits for,");
  return absl::DeadlineExceededError(absl::StrCat(
      head, "no progress within ", absl::FormatDuration(timeout_),
      " waiting for ", waiting,
      peer.empty() ? " that stalled or died" : " stalled or died)"));
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

// The status behind a failed rendezvous: the store's own, when it kept one.
absl::Status RendezvousError(gloo::rendezvous::Store& store,
                             const std::exception& e, int rank, int size) {
  std::string head =
      absl::StrCat("Gloo rendezvous of rank ", rank, " of ", size, " failed: ");
  auto* kv_store = dynamic_cast<KvGlooStore*>(&store);
  if (kv_store != nullptr && !kv_store->last_error().ok()) {
    absl::Status cause = kv_store->last_error();
    return absl::Status(cause.code(), absl::StrCat(head, cause.message()));
  }
  std::string what = StripLocation(e.what());
  bool timed_out = what.find("imeout") != std::string::npos ||
                   what.find("Timed out") != std::string::npos;
  return absl::Status(timed_out ? absl::StatusCode::kDeadlineExceeded
                                : absl::StatusCode::kUnavailable,
                      absl::StrCat(head, what));
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

}  // namespace

// Learns the addresses by which Gloo's messages name peers: each rank
// publishes its per-pair addresses (Gloo binds both ends of a connection to
// them) through the store. Throws as the store does.
std::map<std::string, int> MapPeerAddresses(gloo::rendezvous::Store& store,
                                            gloo::Context& context) {
  std::vector<std::string> mine(context.size);
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer != context.rank)
      mine[peer] = context.getPair(peer)->address().str();
  }
  std::string joined = absl::StrJoin(mine, "\n");
  store.set(absl::StrCat("cohort_addresses_", context.rank),
            std::vector<char>(joined.begin(), joined.end()));
  std::map<std::string, int> peer_by_address;
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer == context.rank) continue;
    std::vector<char> bytes =
        store.get(absl::StrCat("cohort_addresses_", peer));
    std::vector<std::string> theirs =
        absl::StrSplit(std::string(bytes.begin(), bytes.end()), '\n');
    if (context.rank < static_cast<int>(theirs.size())) {
      peer_by_address[theirs[context.rank]] = peer;
    }
  }
  return peer_by_address;
}

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
                     "': ", StripLocation(e.what())));
  }
  auto context =
      std::make_shared<gloo::rendezvous::Context>(rank, size, BcubeBase(size));
  context->setTimeout(absl::ToChronoMilliseconds(options.timeout));
  std::map<std::string, int> peer_by_address;
  try {
    context->connectFullMesh(store, device);
    peer_by_address = MapPeerAddresses(store, *context);
  } catch (const std::exception& e) {
    return RendezvousError(store, e, rank, size);
  }
  return std::unique_ptr<Communicator>(
      new GlooCommunicator(std::move(context), algorithm, options.algorithm,
                           options.timeout, std::move(peer_by_address)));
}

}  // namespace cohort

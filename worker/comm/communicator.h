// Communicator: collectives across the workers of one job (one rank per
// worker process), plus its Gloo implementation over TCP.
//
// A communicator has one or more lanes: independent channels, each with its
// own collective order, so that consecutive all-reduces can overlap. Each
// lane is used by one thread at a time (a BucketReducer's thread per lane
// while a step is in flight); AllReduceSum uses lane 0. Every rank must issue
// the same collectives in the same order on each lane. Once a collective
// fails, the communicator is broken for good: it closes its connections (so
// that peers fail promptly instead of waiting out their own timeout) and
// every later call returns the first error. Plans must not outlive their
// communicator. Destroying a healthy Gloo communicator waits (at most
// min(timeout, 5 s)) until every peer destroys its own, so that no peer is
// cut off inside its last collective: destroy the ranks of one process
// concurrently, not one after another.
#ifndef COHORT_WORKER_COMM_COMMUNICATOR_H_
#define COHORT_WORKER_COMM_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/half_convert.h"
#include "gloo/rendezvous/store.h"
#include "worker/comm/connect_abort.h"
#include "worker/comm/port_range.h"

namespace cohort {

// A reusable in-place sum over one fixed buffer
// (Communicator::PlanAllReduceSum).
class AllReducePlan {
 public:
  virtual ~AllReducePlan() = default;
  // Same contract as Communicator::AllReduceSum on the planned buffer.
  virtual absl::Status Run() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int lanes() const { return 1; }

  // Breaks the communicator for good with `why`: every later call returns
  // it, and peers blocked on this rank fail at once instead of at their
  // timeout. For a rank that leaves its generation between collectives
  // (from the thread that issues them); the destructor then hangs up
  // without waiting for the peers.
  virtual void Abort(const absl::Status& why) {}

  // In-place sum across all ranks. Blocks. Fails (never hangs) within the
  // collective timeout when a peer dies or stalls; the message names the peer
  // rank if known.
  virtual absl::Status AllReduceSum(float* data, int64_t count) = 0;

  // Prepares AllReduceSum over [data, data + count) on `lane` for repeated
  // use. Gloo then skips its per-call setup (scratch buffers as large as the
  // data, buffer registration), which costs up to half the time of a large
  // all-reduce. Creating a plan is part of its lane's collective order: every
  // rank creates its plans, and runs them, in the same order per lane. The
  // default (one lane) plan just calls AllReduceSum.
  virtual absl::StatusOr<std::unique_ptr<AllReducePlan>> PlanAllReduceSum(
      float* data, int64_t count, int lane);

  // The same over 16-bit floats (compressed gradients): each addition in
  // float, rounded once to `format`. UNIMPLEMENTED where the communicator
  // has no 16-bit path (the default).
  virtual absl::StatusOr<std::unique_ptr<AllReducePlan>> PlanAllReduceSum16(
      uint16_t* data, int64_t count, int lane, HalfFormat format);
};

struct GlooOptions {
  // ring, ring_chunked, halving_doubling or bcube (Gloo's algorithm classes).
  // Geometric mean of cohort's bus bandwidth over 1-64 MiB on loopback, 2 / 4
  // ranks (bench/allreduce.cc, one run each): halving_doubling 1.09 / 0.71
  // GB/s, bcube 1.13 / 0.71, ring 1.18 / 0.37, ring_chunked 1.03 / 0.40.
  // halving_doubling ties for best at 4 ranks and is within run-to-run noise
  // at 2, where ring's lead does not survive more ranks.
  std::string algorithm = "halving_doubling";
  // Bounds connecting to peers and every collective.
  absl::Duration timeout = absl::Seconds(30);
  // Address this rank listens on and peers connect to: one they can reach
  // (this node's IP or resolvable name, not 0.0.0.0).
  std::string hostname = "127.0.0.1";
  // Independent connections per peer (1..8). Gloo leaves the wire idle
  // between consecutive all-reduces on one connection; with 25 MiB buckets
  // that cost about 10% of bus bandwidth at 64 MiB and 20% at 256 MiB over
  // loopback, which a second lane wins back (bench/allreduce.cc).
  int lanes = 2;
  // All-reduces of up to 16 MiB run on synchronous connections of their own
  // (one set per lane): the calling thread writes and reads the sockets
  // itself instead of handing every message to and from Gloo's event-loop
  // thread. Those hand-offs dominate small all-reduces: 2 LeNet-5 workers on
  // the 2-core CI machine ran at 1.0-1.4x one worker through the event loop,
  // 1.5x with kBlock and 1.8x with kSpin, and 1-16 MiB all-reduces ran at
  // 1.6-5x raw Gloo's bus bandwidth (docs/BENCHMARKS.md). At 2 ranks (and
  // up to 64 KiB x (P-1) beyond) they exchange whole buffers in one message
  // latency instead of halving-doubling's four (DirectAllreduce).
  enum class Wait {
    // kSpin when local ranks x cores_per_rank <= the cores this process may
    // run on, else kBlock. Local ranks are those whose Gloo address has this
    // rank's host.
    kAuto,
    // Poll the socket without sleeping: lowest latency, but a busy core
    // while a rank waits for its peers.
    kSpin,
    // Sleep in recv(2).
    kBlock,
  };
  Wait wait = Wait::kAuto;
  // Compute threads of one rank (replicas x threads each), for kAuto.
  int cores_per_rank = 1;
  // The ports this rank listens on for its peers (one per peer connection
  // while connecting); empty: any free port.
  PortRange ports;
  // Ends the connect early, from another thread, when aborted (a generation
  // that ended while its ranks connected); null: only the timeout ends it.
  // Not owned; must outlive CreateGlooCommunicator.
  ConnectAbort* abort = nullptr;
};

// Connects rank `rank` of `size` to every peer (full mesh) through `store`,
// which is only used during this call. INVALID_ARGUMENT for a bad rank, size,
// timeout or an unknown algorithm (naming the known ones); DEADLINE_EXCEEDED
// naming the ranks that never joined; UNAVAILABLE when peers cannot be
// reached; `options.abort`'s status when it was aborted first. Ignores
// SIGPIPE process-wide unless a handler is installed, so that a peer dying
// mid-transfer fails the collective instead of killing this process.
absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    gloo::rendezvous::Store& store, int rank, int size,
    const GlooOptions& options);

}  // namespace cohort

#endif  // COHORT_WORKER_COMM_COMMUNICATOR_H_

// Communicator: collectives across the workers of one job (one rank per
// worker process), plus its Gloo implementation over TCP.
//
// A Communicator is used by one thread at a time (the BucketReducer's thread
// while a step is in flight); it is not thread-safe. Every rank must issue the
// same collectives in the same order. Once a collective fails, the
// communicator is broken for good: it closes its connections (so that peers
// fail promptly instead of waiting out their own timeout) and every later call
// returns the first error. Plans must not outlive their communicator.
#ifndef COHORT_WORKER_COMM_COMMUNICATOR_H_
#define COHORT_WORKER_COMM_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"

namespace cohort {

// A reusable in-place sum over one fixed buffer (Communicator::PlanAllReduce).
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

  // In-place sum across all ranks. Blocks. Fails (never hangs) within the
  // collective timeout when a peer dies or stalls; the message names the peer
  // rank if known.
  virtual absl::Status AllReduceSum(float* data, int64_t count) = 0;

  // Prepares AllReduceSum over [data, data + count) for repeated use. Gloo
  // then skips its per-call setup (scratch buffers as large as the data,
  // buffer registration), which costs up to half the time of a large
  // all-reduce. Creating a plan is part of the collective order: every rank
  // creates its plans, and runs them, in the same order as its other
  // collectives. The default plan just calls AllReduceSum.
  virtual absl::StatusOr<std::unique_ptr<AllReducePlan>> PlanAllReduceSum(
      float* data, int64_t count);
};

struct GlooOptions {
  // ring, ring_chunked, halving_doubling or bcube (Gloo's algorithm classes).
  // ring_chunked was fastest over loopback at 2 and 4 ranks from 1 MiB up
  // (see bench/allreduce.cc and docs/BENCHMARKS.md).
  std::string algorithm = "ring_chunked";
  // Bounds connecting to peers and every collective.
  absl::Duration timeout = absl::Seconds(30);
  // Address this rank listens on for peers.
  std::string hostname = "127.0.0.1";
};

// Connects rank `rank` of `size` to every peer (full mesh) through `store`,
// which is only used during this call. INVALID_ARGUMENT for a bad rank, size,
// timeout or an unknown algorithm (naming the known ones); DEADLINE_EXCEEDED
// naming the ranks that never joined; UNAVAILABLE when peers cannot be
// reached. Ignores SIGPIPE process-wide unless a handler is installed, so
// that a peer dying mid-transfer fails the collective instead of killing this
// process.
absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    gloo::rendezvous::Store& store, int rank, int size,
    const GlooOptions& options);

}  // namespace cohort

#endif  // COHORT_WORKER_COMM_COMMUNICATOR_H_

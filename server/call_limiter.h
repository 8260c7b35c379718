// Bounds how many blocking calls (calls that wait for something to happen:
// the coordinator's KvWait and Join) a server runs at once, per client
// connection and in all. Past either bound a call is refused at once with
// RESOURCE_EXHAUSTED naming the bound, before its request is read.
//
// Why: in gRPC's synchronous server every call in progress holds a thread,
// and every waiting call wakes up periodically to see whether its client
// went away. 8,000 KvWait calls from one client made the coordinator run
// 8,000 threads that spent both cores contending for the KV store's lock,
// and heartbeats of healthy workers were not answered in time. With the
// bound, the calls that wait are few, a refusal costs no lock but this
// class's own, and heartbeats (never limited) keep their threads and CPU.
//
// A peer is gRPC's ServerContext::peer(), i.e. one connection (address and
// port): each worker's calls share its one connection, and a client that
// opens many connections to get around the per-peer bound meets the total.
//
// A share of the total is reserved for priority calls (a worker's Join, and
// the calls of a connection whose Join was let in: the KvWaits that
// bootstrap the collectives): ordinary calls may not take it. Without it, a
// flood over ten connections filled the total and a forming job's workers
// were refused their joins for as long as the flood lasted.
//
// Ownership: the limiter owns its counts; a Slot refers to the limiter that
// issued it, which must outlive it. Thread-safe.
#ifndef COHORT_SERVER_CALL_LIMITER_H_
#define COHORT_SERVER_CALL_LIMITER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace cohort {

struct CallLimits {
  // At most this many blocking calls from one peer at once ...
  int per_peer = 32;
  // ... and from all peers together ...
  int total = 1024;
  // ... of which ordinary (not priority) calls may take all but this many.
  int reserved = 0;
  // What the calls are, for messages: "blocking calls (KvWait, Join)".
  std::string what = "blocking calls";
};

class CallLimiter {
 public:
  // Holds one call's place until destroyed (or moved from).
  class Slot {
   public:
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot();

   private:
    friend class CallLimiter;
    Slot(CallLimiter* limiter, std::string peer, bool priority)
        : limiter_(limiter), peer_(std::move(peer)), priority_(priority) {}
    void Release();

    CallLimiter* limiter_;
    std::string peer_;
    bool priority_;
  };

  explicit CallLimiter(CallLimits limits);
  CallLimiter(const CallLimiter&) = delete;
  CallLimiter& operator=(const CallLimiter&) = delete;

  const CallLimits& limits() const { return limits_; }

  // A place for one call from `peer`, or RESOURCE_EXHAUSTED saying which
  // bound it met (and naming the peer). A priority call, or any call from a
  // priority peer, may take the reserved places. Refusals are logged at most
  // every ten seconds, with their count.
  absl::StatusOr<Slot> Acquire(absl::string_view peer, bool priority = false);

  // Calls from `peer` are priority calls from now on. The limiter remembers
  // the last max(reserved, 1) such peers (a worker's connection outlives
  // few regroups, and a bounded set cannot be grown by a client).
  void AddPriorityPeer(absl::string_view peer);

  // Calls holding a Slot now: from `peer`, and in all.
  int InFlight(absl::string_view peer) const;
  int InFlight() const;
  // Calls refused since the limiter was made.
  int64_t refused() const;

 private:
  using Clock = std::chrono::steady_clock;

  void Release(const std::string& peer, bool priority);
  absl::Status Refuse(absl::string_view peer, bool per_peer, bool ordinary)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteRefusal(absl::string_view why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CallLimits limits_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, int> by_peer_ ABSL_GUARDED_BY(mu_);
  int total_ ABSL_GUARDED_BY(mu_) = 0;
  // Of total_, the calls that are not priority calls.
  int ordinary_ ABSL_GUARDED_BY(mu_) = 0;
  // AddPriorityPeer's peers, oldest first, and as a set.
  std::deque<std::string> priority_order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> priority_peers_ ABSL_GUARDED_BY(mu_);
  int64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
  // Refusals since the last log line, and when that was.
  int64_t unlogged_ ABSL_GUARDED_BY(mu_) = 0;
  Clock::time_point logged_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort

#endif  // COHORT_SERVER_CALL_LIMITER_H_

// Test helper: the ranks of one job as threads of this process, connected by
// Gloo over loopback through one InMemoryKv (Gloo's own test style).
//
// A LocalGroup owns its communicators and its KV. Run() is called from one
// thread at a time; each rank's communicator is then used by its own thread.
#ifndef COHORT_WORKER_COMM_TEST_RANKS_H_
#define COHORT_WORKER_COMM_TEST_RANKS_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "client/kv_client.h"
#include "worker/comm/communicator.h"

namespace cohort {

// Runs fn(rank) for every rank in [0, size) on its own thread; joins them.
void RunOnThreads(int size, const std::function<void(int)>& fn);

class LocalGroup {
 public:
  // Connects `size` ranks concurrently; the first failure, if any.
  static absl::StatusOr<std::unique_ptr<LocalGroup>> Connect(
      int size, const GlooOptions& options);
  // Destroys the communicators concurrently, as separate processes would:
  // each one's destructor waits for its peers.
  ~LocalGroup();

  int size() const { return static_cast<int>(comms_.size()); }
  Communicator& comm(int rank) { return *comms_[rank]; }
  void Run(const std::function<void(int)>& fn) { RunOnThreads(size(), fn); }

 private:
  LocalGroup() = default;

  InMemoryKv kv_;
  std::vector<std::unique_ptr<Communicator>> comms_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_COMM_TEST_RANKS_H_

// One thread per parameter-server shard, each running its shard's part of
// the client's current call: Start() hands the threads a function and
// returns, Wait() collects the statuses. A call costs two
// condition-variable hand-offs per shard, not a thread start.
//
// Ownership: owns its threads, started by the constructor and joined by the
// destructor. Thread safety: one thread calls Start and Wait, in turn.
#ifndef COHORT_CLIENT_SHARD_THREADS_H_
#define COHORT_CLIENT_SHARD_THREADS_H_

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace cohort {

class ShardThreads {
 public:
  explicit ShardThreads(int n);
  ~ShardThreads();

  // Runs fn(i) on thread i for every i with which[i]; `fn` must stay valid
  // until Wait() returns. One call at a time.
  void Start(const std::vector<bool>& which,
             std::function<absl::Status(int)> fn);

  // The statuses of the last Start(), by thread, once all are done.
  std::vector<absl::Status> Wait();

 private:
  void Loop(int i);

  absl::Mutex mu_;
  std::function<absl::Status(int)> fn_;
  std::vector<bool> which_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> results_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace cohort

#endif  // COHORT_CLIENT_SHARD_THREADS_H_

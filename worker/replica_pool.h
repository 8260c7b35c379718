// Runs one function on every local replica in parallel, step after step.
//
// Replica 0 runs on the calling thread; replicas 1..R-1 on threads the pool
// owns for its whole life, so a training step costs no thread creation. A
// round wakes the workers, runs fn(r) everywhere and returns when all are
// done. Workers spin briefly before they sleep: steps of small models take
// microseconds, and a condition-variable wake-up alone would cost more.
//
// Thread safety: Run() is called from one thread at a time.
#ifndef COHORT_WORKER_REPLICA_POOL_H_
#define COHORT_WORKER_REPLICA_POOL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace cohort {

class ReplicaPool {
 public:
  explicit ReplicaPool(int replicas);
  ~ReplicaPool();
  ReplicaPool(const ReplicaPool&) = delete;
  ReplicaPool& operator=(const ReplicaPool&) = delete;

  int size() const { return replicas_; }

  // Calls fn(r) for r in [0, size()) concurrently; returns when all return.
  void Run(const std::function<void(int)>& fn);

 private:
  void WorkerLoop(int replica);

  const int replicas_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* fn_ = nullptr;
  std::atomic<uint64_t> round_{0};  // bumped to start a round
  std::atomic<int> pending_{0};     // workers still running this round
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;  // for sleeping workers only
};

}  // namespace cohort

#endif  // COHORT_WORKER_REPLICA_POOL_H_

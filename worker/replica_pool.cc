#include "worker/replica_pool.h"

#include "absl/time/time.h"

namespace cohort {
namespace {

// About 50 us of polling before a worker falls back to sleeping.
constexpr int kSpins = 20000;

inline void CpuRelax() { __builtin_ia32_pause(); }

}  // namespace

ReplicaPool::ReplicaPool(int replicas) : replicas_(replicas) {
  for (int r = 1; r < replicas_; ++r) {
    threads_.emplace_back([this, r] { WorkerLoop(r); });
  }
}

ReplicaPool::~ReplicaPool() {
  {
    absl::MutexLock lock(&mu_);
    stop_.store(true);
    round_.fetch_add(1);
  }
  for (auto& t : threads_) t.join();
}

void ReplicaPool::Run(const std::function<void(int)>& fn) {
  if (replicas_ == 1) {
    fn(0);
    return;
  }
  fn_ = &fn;
  pending_.store(replicas_ - 1, std::memory_order_relaxed);
  {
    absl::MutexLock lock(&mu_);  // wakes sleepers waiting on round_
    round_.fetch_add(1, std::memory_order_release);
  }
  fn(0);
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0;) {
    if (++spins < kSpins) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ReplicaPool::WorkerLoop(int replica) {
  uint64_t seen = 0;
  while (true) {
    int spins = 0;
    while (round_.load(std::memory_order_acquire) == seen && spins < kSpins) {
      CpuRelax();
      ++spins;
    }
    if (round_.load(std::memory_order_acquire) == seen) {
      struct Waiting {
        std::atomic<uint64_t>* round;
        uint64_t seen;
        bool Changed() const { return round->load() != seen; }
      } waiting{&round_, seen};
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&waiting, &Waiting::Changed));
    }
    seen = round_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    (*fn_)(replica);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace cohort

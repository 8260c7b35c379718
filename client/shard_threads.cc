#include "client/shard_threads.h"

#include <utility>

namespace cohort {

ShardThreads::ShardThreads(int n) : which_(n), results_(n) {
  for (int i = 0; i < n; ++i) threads_.emplace_back([this, i] { Loop(i); });
}

ShardThreads::~ShardThreads() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void ShardThreads::Start(const std::vector<bool>& which,
                         std::function<absl::Status(int)> fn) {
  absl::MutexLock lock(&mu_);
  fn_ = std::move(fn);
  which_ = which;
  for (size_t i = 0; i < which.size(); ++i) {
    results_[i] = absl::OkStatus();
    if (which[i]) ++running_;
  }
  ++generation_;
}

std::vector<absl::Status> ShardThreads::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* running) { return *running == 0; }, &running_));
  return results_;
}

void ShardThreads::Loop(int i) {
  uint64_t seen = 0;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto ready = [&] { return stop_ || generation_ != seen; };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      seen = generation_;
      if (!which_[i]) continue;
    }
    // fn_ changes only in Start(), which waits for this call (Wait()).
    absl::Status s = fn_(i);
    absl::MutexLock lock(&mu_);
    results_[i] = std::move(s);
    --running_;
  }
}

}  // namespace cohort

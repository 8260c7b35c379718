#include "worker/comm/test_ranks.h"

#include <thread>
#include <utility>

#include "worker/comm/gloo_store.h"

namespace cohort {

void RunOnThreads(int size, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) threads.emplace_back(fn, rank);
  for (std::thread& thread : threads) thread.join();
}

absl::StatusOr<std::unique_ptr<LocalGroup>> LocalGroup::Connect(
    int size, const GlooOptions& options) {
  std::unique_ptr<LocalGroup> group(new LocalGroup());
  std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> results(size);
  RunOnThreads(size, [&](int rank) {
    KvGlooStore store(&group->kv_, "gloo/", options.timeout);
    results[rank] = CreateGlooCommunicator(store, rank, size, options);
  });
  for (auto& result : results) {
    if (!result.ok()) return result.status();
    group->comms_.push_back(std::move(result).value());
  }
  return group;
}

LocalGroup::~LocalGroup() {
  RunOnThreads(size(), [this](int rank) { comms_[rank].reset(); });
}

}  // namespace cohort

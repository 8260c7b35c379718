// KvClient: the coordinator's small key-value store as a worker sees it. It
// bootstraps the collective libraries (Gloo's rendezvous store, NCCL's unique
// id) so that the coordinator is the only rendezvous point of a job.
//
// The gRPC implementation lives with the coordinator client; InMemoryKv below
// serves tests and single-process runs. Implementations must be thread-safe:
// several threads of one worker may share a client.
#ifndef COHORT_CLIENT_KV_CLIENT_H_
#define COHORT_CLIENT_KV_CLIENT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort {

class KvClient {
 public:
  virtual ~KvClient() = default;

  // Stores `value` under `key`, replacing any earlier value.
  virtual absl::Status Set(const std::string& key,
                           const std::string& value) = 0;

  // The value under `key`, or nullopt when the key is absent.
  virtual absl::StatusOr<std::optional<std::string>> Get(
      const std::string& key) = 0;

  // Blocks until every key in `keys` is present; DEADLINE_EXCEEDED naming
  // the missing keys when `timeout` passes first.
  virtual absl::Status Wait(const std::vector<std::string>& keys,
                            absl::Duration timeout) = 0;

  // Atomically adds `delta` to the integer under `key` (absent counts as 0)
  // and returns the new value.
  virtual absl::StatusOr<int64_t> Add(const std::string& key,
                                      int64_t delta) = 0;
};

// A KvClient over one map in this process. Thread-safe; waiters are woken by
// every Set/Add. InjectError lets tests reproduce a coordinator outage.
class InMemoryKv : public KvClient {
 public:
  InMemoryKv() = default;
  InMemoryKv(const InMemoryKv&) = delete;
  InMemoryKv& operator=(const InMemoryKv&) = delete;

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::optional<std::string>> Get(
      const std::string& key) override;
  absl::Status Wait(const std::vector<std::string>& keys,
                    absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;

  // Every later call (and every call now waiting) fails with `status` until
  // it is called again with OkStatus().
  void InjectError(absl::Status status);

 private:
  bool HasAll(const std::vector<std::string>& keys) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  absl::Status injected_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort

#endif  // COHORT_CLIENT_KV_CLIENT_H_

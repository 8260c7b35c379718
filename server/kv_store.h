// The coordinator's key-value store: what workers use to bootstrap their
// collectives (Gloo's rendezvous store, NCCL's unique id).
//
// Keys belong to one generation: StartGeneration clears the store, and a
// call naming another generation is refused (FAILED_PRECONDITION). The key
// namespace is the clients' business; keys are stored as given. Abort makes
// every blocked and later call fail with the given status (the job failed,
// was stopped, or the coordinator is shutting down) until the next
// generation starts. Keys and values are assumed checked by
// request_checks.h. The store owns its data; all methods are thread-safe,
// and Wait blocks only the calling thread.
#ifndef COHORT_SERVER_KV_STORE_H_
#define COHORT_SERVER_KV_STORE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort {

class KvStore {
 public:
  // Total bytes of keys and values held by default; more is
  // RESOURCE_EXHAUSTED, so a misbehaving client cannot take the
  // coordinator's memory.
  static constexpr int64_t kDefaultMaxTotalBytes = int64_t{1} << 30;

  explicit KvStore(int64_t max_total_bytes = kDefaultMaxTotalBytes)
      : max_total_bytes_(max_total_bytes) {}
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  // Clears the store and opens it for `generation` (> 0).
  void StartGeneration(uint64_t generation);
  // `status` (not OK) is returned by every call until the next generation;
  // the first abort's status wins.
  void Abort(absl::Status status);

  absl::Status Set(uint64_t generation, const std::string& key,
                   std::string value);
  // nullopt when the key does not exist.
  absl::StatusOr<std::optional<std::string>> Get(uint64_t generation,
                                                 const std::string& key) const;
  // Returns once every key exists. DEADLINE_EXCEEDED naming the missing keys
  // after `timeout`; CANCELLED when `cancelled` (polled every 100 ms, may be
  // empty) says the caller went away.
  absl::Status Wait(uint64_t generation, const std::vector<std::string>& keys,
                    absl::Duration timeout,
                    const std::function<bool()>& cancelled);
  // Adds `delta` to the key's decimal int64 value (a missing key is 0),
  // atomically, and returns the new value.
  absl::StatusOr<int64_t> Add(uint64_t generation, const std::string& key,
                              int64_t delta);

 private:
  absl::Status CheckOpen(uint64_t generation) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status Put(const std::string& key, std::string value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::string> Missing(const std::vector<std::string>& keys) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const int64_t max_total_bytes_;
  mutable absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  // Signalled by every change that can end a Wait (a key set, a new
  // generation, an abort).
  absl::CondVar changed_;
  absl::flat_hash_map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  int64_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cohort

#endif  // COHORT_SERVER_KV_STORE_H_

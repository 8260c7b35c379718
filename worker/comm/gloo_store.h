// KvGlooStore: Gloo's rendezvous Store over the coordinator's KV, so that the
// coordinator is the only rendezvous point (no shared file system, no extra
// store host). Every key is prefixed, normally with the generation, so that a
// new round of rendezvous never reads a stale round's addresses.
//
// The store does not own the KvClient, which must outlive it. Gloo's Store
// contract is exception-based: a KV failure or timeout throws
// gloo::IoException with one sentence saying what was missing; callers (see
// CreateGlooCommunicator) turn it back into an absl::Status and can read the
// original status from last_error(). Thread-safe if the KvClient is.
#ifndef COHORT_WORKER_COMM_GLOO_STORE_H_
#define COHORT_WORKER_COMM_GLOO_STORE_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/kv_client.h"
#include "gloo/rendezvous/store.h"

namespace cohort {

class KvGlooStore : public gloo::rendezvous::Store {
 public:
  // `timeout` bounds get() and the wait() overload without a timeout.
  KvGlooStore(KvClient* kv, std::string prefix, absl::Duration timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  // Blocks until `key` exists (Gloo's stores all do), up to the timeout.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // The status behind the last exception thrown (OK if none was).
  absl::Status last_error() const;

 private:
  // Records `status` and throws it as a gloo::IoException.
  [[noreturn]] void Fail(absl::Status status);
  // Turns a failed KV wait into one sentence naming the missing keys; Gloo
  // uses rank numbers as keys, so missing ranks are named as such.
  absl::Status DescribeWaitFailure(const std::vector<std::string>& keys,
                                   absl::Duration timeout,
                                   const absl::Status& status);

  KvClient* const kv_;
  const std::string prefix_;
  const absl::Duration timeout_;
  mutable absl::Mutex mu_;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort

#endif  // COHORT_WORKER_COMM_GLOO_STORE_H_

#include "server/kv_store.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "server/request_checks.h"

namespace cohort {
namespace {

using Clock = std::chrono::steady_clock;

// How often a waiting KvWait looks whether its client went away (the sync
// gRPC API has no notification of that).
constexpr absl::Duration kCancelPoll = absl::Milliseconds(100);

// At most this many missing keys are named in a timeout message.
constexpr size_t kNamedKeys = 10;

std::string DescribeMissing(const std::vector<std::string>& missing,
                            size_t wanted) {
  std::vector<std::string> named;
  for (size_t i = 0; i < missing.size() && i < kNamedKeys; ++i) {
    named.push_back(QuoteForMessage(missing[i]));
  }
  std::string s = absl::StrCat(missing.size(), " of ", wanted,
                               " keys missing: ", absl::StrJoin(named, ", "));
  if (missing.size() > kNamedKeys) {
    absl::StrAppend(&s, " and ", missing.size() - kNamedKeys, " more");
  }
  return s;
}

}  // namespace

void KvStore::StartGeneration(uint64_t generation) {
  CHECK_GT(generation, 0u);
  absl::MutexLock lock(&mu_);
  generation_ = generation;
  aborted_ = absl::OkStatus();
  values_.clear();
  total_bytes_ = 0;
  changed_.SignalAll();
}

void KvStore::Abort(absl::Status status) {
  CHECK(!status.ok());
  absl::MutexLock lock(&mu_);
  if (aborted_.ok()) aborted_ = std::move(status);
  changed_.SignalAll();
}

absl::Status KvStore::CheckOpen(uint64_t generation) const {
  if (!aborted_.ok()) return aborted_;
  if (generation != generation_) {
    return StaleGeneration(generation, generation_);
  }
  return absl::OkStatus();
}

absl::Status KvStore::Put(const std::string& key, std::string value) {
  auto it = values_.find(key);
  const int64_t old_bytes =
      it == values_.end() ? 0 : key.size() + it->second.size();
  const int64_t total = total_bytes_ - old_bytes + key.size() + value.size();
  if (total > max_total_bytes_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("setting key ", QuoteForMessage(key), " (", value.size(),
                     " bytes) would take the KV store past its limit of ",
                     max_total_bytes_, " bytes"));
  }
  total_bytes_ = total;
  values_[key] = std::move(value);
  changed_.SignalAll();
  return absl::OkStatus();
}

absl::Status KvStore::Set(uint64_t generation, const std::string& key,
                          std::string value) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckOpen(generation));
  return Put(key, std::move(value));
}

absl::StatusOr<std::optional<std::string>> KvStore::Get(
    uint64_t generation, const std::string& key) const {
  absl::ReaderMutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckOpen(generation));
  auto it = values_.find(key);
  if (it == values_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

std::vector<std::string> KvStore::Missing(
    const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const std::string& k : keys) {
    if (!values_.contains(k)) missing.push_back(k);
  }
  return missing;
}

// The waiters sleep on a condition variable that only changes to the store
// signal, not on the mutex with an absl::Condition: every unlock of the
// mutex would evaluate each waiter's condition, and each waiter would queue
// on the mutex again at every poll, which with thousands of waiters (a
// flood of KvWait) took both cores of a machine.
absl::Status KvStore::Wait(uint64_t generation,
                           const std::vector<std::string>& keys,
                           absl::Duration timeout,
                           const std::function<bool()>& cancelled) {
  const Clock::time_point deadline =
      Clock::now() + absl::ToChronoNanoseconds(timeout);
  absl::MutexLock lock(&mu_);
  while (true) {
    RETURN_IF_ERROR(CheckOpen(generation));
    const std::vector<std::string> missing = Missing(keys);
    if (missing.empty()) return absl::OkStatus();
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "KvWait timed out after %.1fs: %s", absl::ToDoubleSeconds(timeout),
          DescribeMissing(missing, keys.size())));
    }
    if (cancelled && cancelled()) {
      return absl::CancelledError("the client cancelled the KvWait");
    }
    const absl::Duration slice =
        std::min(absl::FromChrono(deadline - now), kCancelPoll);
    changed_.WaitWithTimeout(&mu_, slice);
  }
}

absl::StatusOr<int64_t> KvStore::Add(uint64_t generation,
                                     const std::string& key, int64_t delta) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckOpen(generation));
  int64_t value = 0;
  auto it = values_.find(key);
  if (it != values_.end() && !absl::SimpleAtoi(it->second, &value)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "KvAdd: key ", QuoteForMessage(key), " holds ",
        QuoteForMessage(it->second), ", which is not a decimal int64"));
  }
  int64_t sum;
  if (__builtin_add_overflow(value, delta, &sum)) {
    return absl::OutOfRangeError(
        absl::StrCat("KvAdd: key ", QuoteForMessage(key), " holds ", value,
                     "; adding ", delta, " overflows int64"));
  }
  RETURN_IF_ERROR(Put(key, absl::StrCat(sum)));
  return sum;
}

}  // namespace cohort

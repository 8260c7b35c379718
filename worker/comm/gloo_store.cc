#include "worker/comm/gloo_store.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gloo/common/error.h"

namespace cohort {

KvGlooStore::KvGlooStore(KvClient* kv, std::string prefix,
                         absl::Duration timeout)
    : kv_(kv), prefix_(std::move(prefix)), timeout_(timeout) {}

void KvGlooStore::Fail(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    last_error_ = status;
  }
  throw gloo::IoException(std::string(status.message()));
}

absl::Status KvGlooStore::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

void KvGlooStore::set(const std::string& key, const std::vector<char>& data) {
  absl::Status status =
      kv_->Set(prefix_ + key, std::string(data.begin(), data.end()));
  if (!status.ok()) {
    Fail(absl::Status(status.code(),
                      absl::StrCat("cannot publish Gloo rendezvous key '",
                                   prefix_, key, "': ", status.message())));
  }
}

std::vector<char> KvGlooStore::get(const std::string& key) {
  wait({key});
  absl::StatusOr<std::optional<std::string>> value = kv_->Get(prefix_ + key);
  if (!value.ok()) {
    Fail(absl::Status(value.status().code(),
                      absl::StrCat("cannot read Gloo rendezvous key '", prefix_,
                                   key, "': ", value.status().message())));
  }
  if (!value->has_value()) {
    Fail(absl::NotFoundError(absl::StrCat("Gloo rendezvous key '", prefix_, key,
                                          "' vanished after it was set")));
  }
  return std::vector<char>((*value)->begin(), (*value)->end());
}

void KvGlooStore::wait(const std::vector<std::string>& keys) {
  wait(keys, absl::ToChronoMilliseconds(timeout_));
}

void KvGlooStore::wait(const std::vector<std::string>& keys,
                       const std::chrono::milliseconds& timeout) {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const std::string& key : keys) prefixed.push_back(prefix_ + key);
  absl::Duration limit = absl::FromChrono(timeout);
  absl::Status status = kv_->Wait(prefixed, limit);
  if (!status.ok()) Fail(DescribeWaitFailure(keys, limit, status));
}

absl::Status KvGlooStore::DescribeWaitFailure(
    const std::vector<std::string>& keys, absl::Duration timeout,
    const absl::Status& status) {
  if (status.code() != absl::StatusCode::kDeadlineExceeded) {
    return absl::Status(
        status.code(),
        absl::StrCat("cannot wait for Gloo rendezvous key(s) under '", prefix_,
                     "': ", status.message()));
  }
  // Find out which keys are missing; this costs a few lookups, but only on
  // the way out of a failed rendezvous.
  std::vector<std::string> missing;
  bool all_ranks = true;
  for (const std::string& key : keys) {
    absl::StatusOr<std::optional<std::string>> value = kv_->Get(prefix_ + key);
    if (value.ok() && value->has_value()) continue;
    missing.push_back(key);
    int rank;
    all_ranks = all_ranks && absl::SimpleAtoi(key, &rank);
  }
  if (missing.empty()) missing = keys;
  std::string what =
      all_ranks ? absl::StrCat("rank(s) ", absl::StrJoin(missing, ", "),
                               " did not join")
                : absl::StrCat("key(s) ", absl::StrJoin(missing, ", "),
                               " were not set");
  return absl::DeadlineExceededError(
      absl::StrCat(what, " within ", absl::FormatDuration(timeout),
                   " (Gloo rendezvous under KV prefix '", prefix_, "')"));
}

}  // namespace cohort

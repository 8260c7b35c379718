#include "client/kv_client.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort {

absl::Status InMemoryKv::Set(const std::string& key, const std::string& value) {
  absl::MutexLock lock(&mu_);
  if (!injected_.ok()) return injected_;
  values_[key] = value;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> InMemoryKv::Get(
    const std::string& key) {
  absl::MutexLock lock(&mu_);
  if (!injected_.ok()) return injected_;
  auto it = values_.find(key);
  if (it == values_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

bool InMemoryKv::HasAll(const std::vector<std::string>& keys) const {
  for (const std::string& key : keys) {
    if (values_.count(key) == 0) return false;
  }
  return true;
}

absl::Status InMemoryKv::Wait(const std::vector<std::string>& keys,
                              absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  // An injected error wakes waiters too, as a dropped connection would.
  auto ready = [this, &keys]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !injected_.ok() || HasAll(keys);
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (!injected_.ok()) return injected_;
  if (HasAll(keys)) return absl::OkStatus();
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    if (values_.count(key) == 0) missing.push_back(key);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("timed out after ", absl::FormatDuration(timeout),
                   " waiting for key(s) ", absl::StrJoin(missing, ", ")));
}

absl::StatusOr<int64_t> InMemoryKv::Add(const std::string& key, int64_t delta) {
  absl::MutexLock lock(&mu_);
  if (!injected_.ok()) return injected_;
  int64_t value = 0;
  auto it = values_.find(key);
  if (it != values_.end() && !absl::SimpleAtoi(it->second, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("key '", key, "' holds '", it->second,
                     "', not an integer, so Add cannot update it"));
  }
  value += delta;
  values_[key] = absl::StrCat(value);
  return value;
}

void InMemoryKv::InjectError(absl::Status status) {
  absl::MutexLock lock(&mu_);
  injected_ = std::move(status);
}

}  // namespace cohort

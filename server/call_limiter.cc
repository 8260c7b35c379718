#include "server/call_limiter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace cohort {
namespace {

// A flood is refused thousands of times a second: the log gets one line
// per period, with the count.
constexpr std::chrono::seconds kLogPeriod(10);

}  // namespace

CallLimiter::Slot::Slot(Slot&& other) noexcept
    : limiter_(other.limiter_),
      peer_(std::move(other.peer_)),
      priority_(other.priority_) {
  other.limiter_ = nullptr;
}

CallLimiter::Slot& CallLimiter::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    limiter_ = other.limiter_;
    peer_ = std::move(other.peer_);
    priority_ = other.priority_;
    other.limiter_ = nullptr;
  }
  return *this;
}

CallLimiter::Slot::~Slot() { Release(); }

void CallLimiter::Slot::Release() {
  if (limiter_ != nullptr) limiter_->Release(peer_, priority_);
  limiter_ = nullptr;
}

CallLimiter::CallLimiter(CallLimits limits) : limits_(std::move(limits)) {
  CHECK_GT(limits_.per_peer, 0);
  CHECK_GT(limits_.total, 0);
  CHECK_GE(limits_.reserved, 0);
  CHECK_LT(limits_.reserved, limits_.total);
}

absl::StatusOr<CallLimiter::Slot> CallLimiter::Acquire(absl::string_view peer,
                                                       bool priority) {
  absl::MutexLock lock(&mu_);
  priority = priority || priority_peers_.contains(peer);
  if (total_ >= limits_.total) return Refuse(peer, false, false);
  if (!priority && ordinary_ >= limits_.total - limits_.reserved) {
    return Refuse(peer, false, true);
  }
  auto it = by_peer_.find(peer);
  if (it != by_peer_.end() && it->second >= limits_.per_peer) {
    return Refuse(peer, true, !priority);
  }
  if (it == by_peer_.end()) it = by_peer_.emplace(peer, 0).first;
  ++it->second;
  ++total_;
  if (!priority) ++ordinary_;
  return Slot(this, std::string(peer), priority);
}

absl::Status CallLimiter::Refuse(absl::string_view peer, bool per_peer,
                                 bool ordinary) {
  if (per_peer) {
    NoteRefusal(absl::StrCat("the per-connection bound, e.g. for ", peer));
    return absl::ResourceExhaustedError(absl::StrCat(
        "too many concurrent ", limits_.what, " from ", peer, ": at most ",
        limits_.per_peer, " per client connection; retry later"));
  }
  NoteRefusal(ordinary ? "the total for ordinary calls" : "the total");
  const std::string kept = ordinary
                               ? absl::StrCat(", and keeps ", limits_.reserved,
                                              " of them for joining workers")
                               : "";
  return absl::ResourceExhaustedError(absl::StrCat(
      "too many concurrent ", limits_.what, ": this server runs at most ",
      limits_.total, " at once from all clients", kept, "; retry later"));
}

void CallLimiter::AddPriorityPeer(absl::string_view peer) {
  absl::MutexLock lock(&mu_);
  if (!priority_peers_.insert(std::string(peer)).second) return;
  priority_order_.emplace_back(peer);
  const size_t keep = std::max(limits_.reserved, 1);
  while (priority_order_.size() > keep) {
    priority_peers_.erase(priority_order_.front());
    priority_order_.pop_front();
  }
}

void CallLimiter::Release(const std::string& peer, bool priority) {
  absl::MutexLock lock(&mu_);
  auto it = by_peer_.find(peer);
  CHECK(it != by_peer_.end() && it->second > 0 && total_ > 0);
  if (--it->second == 0) by_peer_.erase(it);
  --total_;
  if (!priority) {
    CHECK_GT(ordinary_, 0);
    --ordinary_;
  }
}

void CallLimiter::NoteRefusal(absl::string_view why) {
  ++refused_;
  ++unlogged_;
  const Clock::time_point now = Clock::now();
  if (logged_ != Clock::time_point() && now - logged_ < kLogPeriod) return;
  LOG(WARNING) << "refused " << unlogged_ << " " << limits_.what
               << (logged_ == Clock::time_point() ? "" : " in the last 10s")
               << " at " << why << " (at most " << limits_.per_peer
               << " per client connection, " << limits_.total << " in all, "
               << limits_.reserved << " of them kept for priority calls); "
               << total_ << " running";
  unlogged_ = 0;
  logged_ = now;
}

int CallLimiter::InFlight(absl::string_view peer) const {
  absl::MutexLock lock(&mu_);
  auto it = by_peer_.find(peer);
  return it == by_peer_.end() ? 0 : it->second;
}

int CallLimiter::InFlight() const {
  absl::MutexLock lock(&mu_);
  return total_;
}

int64_t CallLimiter::refused() const {
  absl::MutexLock lock(&mu_);
  return refused_;
}

}  // namespace cohort

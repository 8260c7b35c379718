#include "server/call_limiter.h"

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
    : limiter_(other.limiter_), peer_(std::move(other.peer_)) {
  other.limiter_ = nullptr;
}

CallLimiter::Slot& CallLimiter::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    limiter_ = other.limiter_;
    peer_ = std::move(other.peer_);
    other.limiter_ = nullptr;
  }
  return *this;
}

CallLimiter::Slot::~Slot() { Release(); }

void CallLimiter::Slot::Release() {
  if (limiter_ != nullptr) limiter_->Release(peer_);
  limiter_ = nullptr;
}

CallLimiter::CallLimiter(CallLimits limits) : limits_(std::move(limits)) {
  CHECK_GT(limits_.per_peer, 0);
  CHECK_GT(limits_.total, 0);
}

absl::StatusOr<CallLimiter::Slot> CallLimiter::Acquire(absl::string_view peer) {
  absl::MutexLock lock(&mu_);
  if (total_ >= limits_.total) {
    NoteRefusal("the total");
    return absl::ResourceExhaustedError(absl::StrCat(
        "too many concurrent ", limits_.what, ": this server runs at most ",
        limits_.total, " at once from all clients; retry later"));
  }
  auto it = by_peer_.find(peer);
  if (it != by_peer_.end() && it->second >= limits_.per_peer) {
    NoteRefusal(absl::StrCat("the per-connection bound, e.g. for ", peer));
    return absl::ResourceExhaustedError(absl::StrCat(
        "too many concurrent ", limits_.what, " from ", peer, ": at most ",
        limits_.per_peer, " per client connection; retry later"));
  }
  if (it == by_peer_.end()) it = by_peer_.emplace(peer, 0).first;
  ++it->second;
  ++total_;
  return Slot(this, std::string(peer));
}

void CallLimiter::Release(const std::string& peer) {
  absl::MutexLock lock(&mu_);
  auto it = by_peer_.find(peer);
  CHECK(it != by_peer_.end() && it->second > 0 && total_ > 0);
  if (--it->second == 0) by_peer_.erase(it);
  --total_;
}

void CallLimiter::NoteRefusal(absl::string_view why) {
  ++refused_;
  ++unlogged_;
  const Clock::time_point now = Clock::now();
  if (logged_ != Clock::time_point() && now - logged_ < kLogPeriod) return;
  LOG(WARNING) << "refused " << unlogged_ << " " << limits_.what
               << (logged_ == Clock::time_point() ? "" : " in the last 10s")
               << " at " << why << " (at most " << limits_.per_peer
               << " per client connection, " << limits_.total << " in all); "
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

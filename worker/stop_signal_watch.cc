#include "worker/stop_signal_watch.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace cohort {
namespace {

// How often the flag is looked at: well under the "second or two" a
// signal may take to be honoured.
constexpr absl::Duration kPoll = absl::Milliseconds(50);

}  // namespace

StopSignalWatch::StopSignalWatch(const std::atomic<bool>* signal,
                                 absl::Duration step_grace)
    : signal_(signal), step_grace_(step_grace) {
  thread_ = std::thread([this] { Loop(); });
}

StopSignalWatch::~StopSignalWatch() {
  done_.Notify();
  if (thread_.joinable()) thread_.join();
}

void StopSignalWatch::Set(const char* waiting, absl::Time deadline,
                          const char* late, CollectiveInterrupt* training) {
  absl::MutexLock lock(&mu_);
  waiting_ = waiting;
  deadline_ = deadline;
  late_ = late;
  waiting_since_ = absl::Now();
  training_ = training;
}

void StopSignalWatch::CheckDeadline() {
  if (waiting_ == nullptr || absl::Now() < deadline_) return;
  std::fprintf(stderr, "cohort worker: %s did not finish within %s%s%s\n",
               waiting_,
               absl::FormatDuration(absl::Trunc(deadline_ - waiting_since_,
                                                absl::Milliseconds(100)))
                   .c_str(),
               *late_ != '\0' ? ": " : "", late_);
  std::fflush(stderr);
  std::_Exit(1);
}

void StopSignalWatch::Loop() {
  // When the signal was first seen in the current training phase.
  absl::Time seen_training = absl::InfiniteFuture();
  CollectiveInterrupt* seen_for = nullptr;
  while (!done_.WaitForNotificationWithTimeout(kPoll)) {
    absl::MutexLock lock(&mu_);
    CheckDeadline();
    if (signal_ == nullptr || !signal_->load()) continue;
    if (waiting_ != nullptr) {
      std::fprintf(stderr,
                   "cohort worker: stopped by a termination signal while %s "
                   "(no training state to save)\n",
                   waiting_);
      std::fflush(stderr);
      std::_Exit(1);
    }
    if (training_ == nullptr) continue;
    if (training_ != seen_for) {
      seen_for = training_;
      seen_training = absl::Now();
    }
    if (absl::Now() - seen_training >= step_grace_) {
      training_->Interrupt(absl::AbortedError(absl::StrCat(
          "stopped by a termination signal: the step in flight had not "
          "finished ",
          absl::FormatDuration(step_grace_), " later")));
    }
  }
}

void StopSignalWatch::EndIfWaiting(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (waiting_ == nullptr) return;
  std::fprintf(stderr, "cohort worker: %s (while %s)\n",
               std::string(why.message()).c_str(), waiting_);
  std::fflush(stderr);
  std::_Exit(1);
}

StopSignalWatch::Waiting::Waiting(StopSignalWatch* watch, const char* what,
                                  absl::Time deadline, const char* late)
    : watch_(watch) {
  watch_->Set(what, deadline, late, nullptr);
}

StopSignalWatch::Waiting::~Waiting() {
  watch_->Set(nullptr, absl::InfiniteFuture(), "", nullptr);
}

StopSignalWatch::Training::Training(StopSignalWatch* watch,
                                    CollectiveInterrupt* interrupt)
    : watch_(watch) {
  watch_->Set(nullptr, absl::InfiniteFuture(), "", interrupt);
}

StopSignalWatch::Training::~Training() {
  watch_->Set(nullptr, absl::InfiniteFuture(), "", nullptr);
}

}  // namespace cohort

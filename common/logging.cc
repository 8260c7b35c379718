#include "common/logging.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace cohort {
namespace {

std::atomic<bool> g_log_info{true};

absl::Mutex& LogMutex() {
  static absl::Mutex* mu = new absl::Mutex();
  return *mu;
}

const char* SeverityTag(logging_internal::Severity s) {
  switch (s) {
    case logging_internal::Severity::kInfo:
      return "I";
    case logging_internal::Severity::kWarning:
      return "W";
    case logging_internal::Severity::kError:
      return "E";
    case logging_internal::Severity::kFatal:
      return "F";
  }
  return "?";
}

}  // namespace

void SetLogInfo(bool enabled) { g_log_info.store(enabled); }

namespace logging_internal {

LogMessage::LogMessage(Severity severity, const char* file, int line)
    : severity_(severity) {
  const char* base = file;
  for (const char* p = file; *p; ++p) {
    if (*p == '/') base = p + 1;
  }
  stream_ << SeverityTag(severity) << " "
          << absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::LocalTimeZone())
          << " " << base << ":" << line << "] ";
}

LogMessage::~LogMessage() {
  if (severity_ == Severity::kInfo && !g_log_info.load()) return;
  stream_ << "\n";
  const std::string text = stream_.str();
  {
    absl::MutexLock lock(&LogMutex());
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  }
  if (severity_ == Severity::kFatal) std::abort();
}

}  // namespace logging_internal
}  // namespace cohort

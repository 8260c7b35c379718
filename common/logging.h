// Minimal logging and invariant checks (Debian's Abseil has no absl/log).
//
// CHECK is for programmer errors only: anything a user, a file or a peer can
// get wrong returns an absl::Status instead. LOG lines go to stderr, one line
// each, prefixed with severity and wall time; writes are serialized.
#ifndef COHORT_COMMON_LOGGING_H_
#define COHORT_COMMON_LOGGING_H_

#include <sstream>
#include <string>

namespace cohort {
namespace logging_internal {

enum class Severity { kInfo, kWarning, kError, kFatal };

// Collects one message and emits it (and aborts, for kFatal) on destruction.
class LogMessage {
 public:
  LogMessage(Severity severity, const char* file, int line);
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
  Severity severity_;
  std::ostringstream stream_;
};

// Lets `CHECK(x) << "..."` compile to nothing when `x` holds.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace logging_internal

// Sets whether INFO lines are printed (default true).
void SetLogInfo(bool enabled);

}  // namespace cohort

#define COHORT_LOG_INFO ::cohort::logging_internal::Severity::kInfo
#define COHORT_LOG_WARNING ::cohort::logging_internal::Severity::kWarning
#define COHORT_LOG_ERROR ::cohort::logging_internal::Severity::kError
#define COHORT_LOG_FATAL ::cohort::logging_internal::Severity::kFatal

#define LOG(severity)                                                     \
  ::cohort::logging_internal::LogMessage(COHORT_LOG_##severity, __FILE__, \
                                         __LINE__)                        \
      .stream()

#define CHECK(condition)                                \
  (condition) ? (void)0                                 \
              : ::cohort::logging_internal::Voidify() & \
                    LOG(FATAL) << "Check failed: " #condition " "

#define CHECK_EQ(a, b) CHECK((a) == (b))
#define CHECK_NE(a, b) CHECK((a) != (b))
#define CHECK_LT(a, b) CHECK((a) < (b))
#define CHECK_LE(a, b) CHECK((a) <= (b))
#define CHECK_GT(a, b) CHECK((a) > (b))
#define CHECK_GE(a, b) CHECK((a) >= (b))

#ifdef NDEBUG
#define DCHECK(condition) \
  while (false) CHECK(condition)
#else
#define DCHECK(condition) CHECK(condition)
#endif
#define DCHECK_EQ(a, b) DCHECK((a) == (b))
#define DCHECK_LT(a, b) DCHECK((a) < (b))
#define DCHECK_LE(a, b) DCHECK((a) <= (b))

#endif  // COHORT_COMMON_LOGGING_H_

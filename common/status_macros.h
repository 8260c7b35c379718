// Status propagation macros. Debian's Abseil 20220623 ships none, so cohort
// defines its own; they behave like the ones in newer Abseil releases.
#ifndef COHORT_COMMON_STATUS_MACROS_H_
#define COHORT_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define COHORT_CONCAT_INNER_(a, b) a##b
#define COHORT_CONCAT_(a, b) COHORT_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    const ::absl::Status cohort_status_ = (expr);    \
    if (!cohort_status_.ok()) return cohort_status_; \
  } while (false)

// `ASSIGN_OR_RETURN(auto x, MakeX());` declares or assigns `x` from an
// absl::StatusOr, or returns its error from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, rexpr)                                        \
  COHORT_ASSIGN_OR_RETURN_IMPL_(COHORT_CONCAT_(cohort_statusor_, __LINE__), \
                                lhs, rexpr)

#define COHORT_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                  \
  if (!statusor.ok()) return statusor.status();             \
  lhs = std::move(statusor).value()

#endif  // COHORT_COMMON_STATUS_MACROS_H_

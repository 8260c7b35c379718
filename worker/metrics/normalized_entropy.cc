#include "worker/metrics/normalized_entropy.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace cohort {

absl::StatusOr<double> NormalizedEntropy(double mean_log_loss,
                                         double positive_rate) {
  const double p = positive_rate;
  // Written so that a NaN rate fails too.
  if (!(p > 0 && p < 1)) {
    return absl::FailedPreconditionError(
        absl::StrCat("normalized entropy is undefined: the positive rate is ",
                     p, " (it needs both positive and negative labels)"));
  }
  const double entropy = -(p * std::log(p) + (1 - p) * std::log1p(-p));
  return mean_log_loss / entropy;
}

}  // namespace cohort

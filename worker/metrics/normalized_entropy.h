// Normalized entropy (He et al., "Practical Lessons from Predicting Clicks
// on Ads at Facebook", 2014): a binary classifier's mean log loss divided
// by the entropy of the positive rate, i.e. by the log loss of always
// predicting that rate. Below 1 the model beats the base rate; lower is
// better. It needs only sums (the loss and the labels), so an evaluation
// split over replicas and workers adds those up and calls this once.
//
// A plain function; thread-safe.
#ifndef COHORT_WORKER_METRICS_NORMALIZED_ENTROPY_H_
#define COHORT_WORKER_METRICS_NORMALIZED_ENTROPY_H_

#include "absl/status/statusor.h"

namespace cohort {

// mean_log_loss / H(p), H(p) = -(p ln p + (1 - p) ln(1 - p)), both in
// nats. FAILED_PRECONDITION unless 0 < positive_rate < 1: with one class
// only the entropy is 0 and the ratio undefined.
absl::StatusOr<double> NormalizedEntropy(double mean_log_loss,
                                         double positive_rate);

}  // namespace cohort

#endif  // COHORT_WORKER_METRICS_NORMALIZED_ENTROPY_H_

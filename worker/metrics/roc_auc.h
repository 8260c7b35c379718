// The exact area under the ROC curve of a binary classifier's scores: the
// probability that a random positive sample scores above a random negative
// one, ties counting half (the Mann-Whitney U statistic over P x N; the
// value sklearn.metrics.roc_auc_score gives). Exact, not a histogram's
// approximation: it sorts every score, so it needs all of them at once.
//
// Plain functions; thread-safe.
#ifndef COHORT_WORKER_METRICS_ROC_AUC_H_
#define COHORT_WORKER_METRICS_ROC_AUC_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace cohort {

// The AUC of `scores` against `labels` (same length; a label >= 0.5 is
// positive, the rule the BCE accuracy uses). Scores only need to be
// ordered like the probabilities, so logits do. NaN when a score is NaN
// (the model diverged; its loss is NaN too). FAILED_PRECONDITION when the
// labels are all of one class (the AUC is undefined); INVALID_ARGUMENT
// when the lengths differ.
absl::StatusOr<double> RocAuc(absl::Span<const float> scores,
                              absl::Span<const float> labels);

// The same from the scores of the positive and of the negative samples,
// which it sorts (hence taken by value). The result does not depend on the
// order of either, so gathering them in any order gives the same bits.
absl::StatusOr<double> RocAucOfGroups(std::vector<float> positives,
                                      std::vector<float> negatives);

}  // namespace cohort

#endif  // COHORT_WORKER_METRICS_ROC_AUC_H_

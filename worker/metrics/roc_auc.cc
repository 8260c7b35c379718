#include "worker/metrics/roc_auc.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

bool AnyNan(const std::vector<float>& v) {
  return std::any_of(v.begin(), v.end(), [](float x) { return std::isnan(x); });
}

}  // namespace

absl::StatusOr<double> RocAuc(absl::Span<const float> scores,
                              absl::Span<const float> labels) {
  if (scores.size() != labels.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("AUC: ", scores.size(), " scores but ", labels.size(),
                     " labels; each sample needs one of each"));
  }
  std::vector<float> positives, negatives;
  for (size_t i = 0; i < scores.size(); ++i) {
    (labels[i] >= 0.5f ? positives : negatives).push_back(scores[i]);
  }
  return RocAucOfGroups(std::move(positives), std::move(negatives));
}

absl::StatusOr<double> RocAucOfGroups(std::vector<float> positives,
                                      std::vector<float> negatives) {
  if (positives.empty() || negatives.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "AUC is undefined: all ", positives.size() + negatives.size(),
        " samples are ", positives.empty() ? "negative" : "positive"));
  }
  // NaN breaks the ordering std::sort relies on.
  if (AnyNan(positives) || AnyNan(negatives)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  std::sort(positives.begin(), positives.end());
  std::sort(negatives.begin(), negatives.end());
  // Twice the U statistic, in integers: 2 per negative scored below a
  // positive, 1 per tie. Exact (2 P N < 2^64); below 2^53 pairs the only
  // rounding is the final division's.
  uint64_t twice_u = 0;
  size_t below = 0, not_above = 0;  // negatives < and <= the positive
  for (const float p : positives) {
    while (below < negatives.size() && negatives[below] < p) ++below;
    if (not_above < below) not_above = below;
    while (not_above < negatives.size() && negatives[not_above] <= p) {
      ++not_above;
    }
    twice_u += 2 * below + (not_above - below);
  }
  const double pairs = static_cast<double>(positives.size()) *
                       static_cast<double>(negatives.size());
  return static_cast<double>(twice_u) / (2 * pairs);
}

}  // namespace cohort

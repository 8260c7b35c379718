#include "common/nearest_name.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace cohort {

int EditDistance(absl::string_view a, absl::string_view b) {
  // One row of the dynamic programme at a time.
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int above = row[j];
      const bool same =
          absl::ascii_tolower(a[i - 1]) == absl::ascii_tolower(b[j - 1]);
      row[j] = std::min({above + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

namespace {

// "kernel" for "kernel_size" and back: a name cut short or run on. Three
// letters at least, so that "lr" is no prefix match for "lr_schedule".
bool StartsEither(absl::string_view a, absl::string_view b) {
  const absl::string_view shorter = a.size() < b.size() ? a : b;
  const absl::string_view longer = a.size() < b.size() ? b : a;
  return shorter.size() >= 3 && absl::StartsWithIgnoreCase(longer, shorter);
}

}  // namespace

std::string NearestName(absl::string_view name,
                        const std::vector<std::string>& candidates) {
  const int near = std::max<int>(2, static_cast<int>(name.size()) / 3);
  std::string best;
  int best_distance = 0;
  for (const std::string& c : candidates) {
    if (c == name) continue;
    const int d = EditDistance(name, c);
    if (d > near && !StartsEither(name, c)) continue;
    if (best.empty() || d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace cohort

// The name a user most likely meant, for messages about a name that does
// not exist: a job spec's unknown field, a command's unknown flag ("did you
// mean ...?").
//
// Thread safety: pure functions.
#ifndef COHORT_COMMON_NEAREST_NAME_H_
#define COHORT_COMMON_NEAREST_NAME_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace cohort {

// Insertions, deletions and substitutions that turn `a` into `b`
// (Levenshtein), ignoring ASCII case.
int EditDistance(absl::string_view a, absl::string_view b);

// The candidate nearest to `name` when it is near enough to be a slip:
// within max(2, length / 3) edits, or one name the start of the other
// ("kernel_size" for "kernel"). The fewest edits win, then the earlier
// candidate. Empty when none is near.
std::string NearestName(absl::string_view name,
                        const std::vector<std::string>& candidates);

}  // namespace cohort

#endif  // COHORT_COMMON_NEAREST_NAME_H_

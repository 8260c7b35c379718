#include "cli/worker_count_flags.h"

#include "absl/strings/str_cat.h"

namespace cohort {

void AddWorkerCountFlags(FlagSet& flags, WorkerCountFlags* f,
                         const std::string& otherwise) {
  const std::string fallback = absl::StrCat("(default: ", otherwise, ")");
  flags.Int("workers", &f->workers,
            absl::StrCat("the job's workers: it starts once INT have joined, "
                         "and more are refused (sets --min-workers and "
                         "--max-workers both) ",
                         fallback),
            1, kMaxWorkers);
  flags.Int("min-workers", &f->min_workers,
            absl::StrCat("the job starts once INT workers have joined (and "
                         "cluster.last_call_ms has passed, unless "
                         "--max-workers have) ",
                         fallback),
            1, kMaxWorkers);
  flags.Int("max-workers", &f->max_workers,
            absl::StrCat("at most INT workers: one more is refused, and the "
                         "coordinator logs it ",
                         fallback),
            1, kMaxWorkers);
}

}  // namespace cohort

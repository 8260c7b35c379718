#include "common/spec_workers.h"

#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

absl::Status CheckRange(const char* flag, int64_t v) {
  if (v >= 0 && v <= kMaxWorkers) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, " must be an integer in [1, ", kMaxWorkers, "], got ", v));
}

// --min-workers above the spec's own maximum.
absl::Status MinAboveMax(int64_t min, int max) {
  return absl::InvalidArgumentError(absl::StrCat(
      "--min-workers=", min, " is more than the spec's cluster.max_workers (",
      max, "): give --max-workers too"));
}

}  // namespace

bool HasDefaultWorkerCounts(const ClusterSpec& cluster) {
  return cluster.min_workers() <= 1 && cluster.max_workers() <= 1;
}

absl::Status ApplyWorkerCounts(const WorkerCountFlags& f, ClusterSpec* c) {
  if (absl::Status s = CheckRange("workers", f.workers); !s.ok()) return s;
  if (absl::Status s = CheckRange("min-workers", f.min_workers); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckRange("max-workers", f.max_workers); !s.ok()) {
    return s;
  }
  if (f.workers > 0 && (f.min_workers > 0 || f.max_workers > 0)) {
    return absl::InvalidArgumentError(
        "--workers=N sets both the minimum and the maximum: give it alone, or "
        "--min-workers and --max-workers");
  }
  if (f.workers > 0) {
    c->set_min_workers(static_cast<int>(f.workers));
    c->set_max_workers(static_cast<int>(f.workers));
    return absl::OkStatus();
  }
  if (f.min_workers > 0 && f.max_workers > 0 && f.min_workers > f.max_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("--min-workers=", f.min_workers,
                     " is more than --max-workers=", f.max_workers));
  }
  const bool max_follows_min = c->max_workers() == c->min_workers();
  if (f.max_workers > 0) {
    if (f.min_workers == 0 && f.max_workers < c->min_workers()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--max-workers=", f.max_workers,
                       " is less than the spec's cluster.min_workers (",
                       c->min_workers(), "): give --min-workers too"));
    }
    c->set_max_workers(static_cast<int>(f.max_workers));
  }
  if (f.min_workers > 0) {
    // (With --max-workers too, the minimum was checked against it above.)
    if (f.min_workers > c->max_workers()) {
      if (!max_follows_min) return MinAboveMax(f.min_workers, c->max_workers());
      c->set_max_workers(static_cast<int>(f.min_workers));
    }
    c->set_min_workers(static_cast<int>(f.min_workers));
  }
  return absl::OkStatus();
}

std::string DescribeWorkerCounts(const ClusterSpec& c) {
  if (c.min_workers() == c.max_workers()) {
    return absl::StrCat(c.min_workers(),
                        c.min_workers() == 1 ? " worker" : " workers");
  }
  return absl::StrCat(c.min_workers(), "..", c.max_workers(), " workers");
}

}  // namespace cohort

// The coordinator's JSON report of a finished job: the keys of `cohort
// train`'s report (worker/report.cc) plus "world_size", "state" and
// "reason", so that scripts read both the same way.
//
// Job-level values come from rank 0's WorkerResult; samples and samples/s
// are summed over the workers that reported. What nobody reported is null
// (or [] for epoch_results). Pure functions, thread-safe.
#ifndef COHORT_SERVER_REPORT_H_
#define COHORT_SERVER_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "proto/coordinator.pb.h"

namespace cohort {

struct JobReport {
  std::string job_name;
  std::string model;  // the spec's zoo name; rank 0's result overrides it
  JobState state = FORMING;
  std::string reason;
  int world_size = 0;
  int total_replicas = 0;
  // Indexed by rank; nullopt for a worker that never called Finish.
  std::vector<std::optional<WorkerResult>> results;
};

std::string JobReportJson(const JobReport& report);

}  // namespace cohort

#endif  // COHORT_SERVER_REPORT_H_

// The coordinator's dashboard: one self-contained HTML page (no external
// scripts, fonts or images, so it works on an air-gapped cluster) that
// polls /api/status and /api/history every 2 s and shows the job's state,
// its workers and shards, and loss, accuracy and throughput charts drawn as
// inline SVG. The coordinator serves it at / on its --metrics-listen port.
//
// Thread safety: returns a constant.
#ifndef COHORT_SERVER_DASHBOARD_H_
#define COHORT_SERVER_DASHBOARD_H_

#include "absl/strings/string_view.h"

namespace cohort {

// The page's HTML (UTF-8).
absl::string_view DashboardHtml();

}  // namespace cohort

#endif  // COHORT_SERVER_DASHBOARD_H_

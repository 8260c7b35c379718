// How the coordinator marks a refusal that retrying later can change, shared
// by the coordinator and its client.
//
// Why a mark: the coordinator refuses a blocking call (Join, KvWait) with
// RESOURCE_EXHAUSTED while too many are running (server/call_limiter.h), and
// a worker retries such a Join; but a Join to a job that already has its
// maximum of workers is RESOURCE_EXHAUSTED too, and retrying that only
// delays the worker's error. The first kind carries this trailing metadata.
#ifndef COHORT_CLIENT_BUSY_REFUSAL_H_
#define COHORT_CLIENT_BUSY_REFUSAL_H_

namespace cohort {

// Trailing metadata key (value "1") of a refusal for being busy.
inline constexpr char kBusyRefusalKey[] = "cohort-busy";

}  // namespace cohort

#endif  // COHORT_CLIENT_BUSY_REFUSAL_H_

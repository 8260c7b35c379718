// How long a parameter-server shard may be away in a job whose shards
// restart from their checkpoints, shared by the shards and the workers'
// clients so that both wait as long (server/job_tracker.h says what the
// coordinator does meanwhile).
#ifndef COHORT_CLIENT_RESTART_WINDOW_H_
#define COHORT_CLIENT_RESTART_WINDOW_H_

#include "absl/time/time.h"
#include "proto/job.pb.h"

namespace cohort {

// Zero without checkpoints (checkpoint.dir): a dead shard fails the job.
// Else: until the coordinator declares the shard dead (the heartbeat bound
// plus a tick), a replacement registers (cluster.join_timeout_ms) and
// restores (as long again, at most). Workers retry a call to an absent
// shard for this long beyond ps.rpc_timeout_ms, and a pull may wait as much
// longer for a peer that is itself stalled by the restart. `job`'s cluster
// defaults must be filled.
inline absl::Duration ShardRestartWindow(const JobSpec& job) {
  if (job.checkpoint().dir().empty()) return absl::ZeroDuration();
  const ClusterSpec& c = job.cluster();
  return absl::Milliseconds(c.heartbeat_interval_ms() *
                                (c.heartbeat_misses() + 1) +
                            2 * c.join_timeout_ms());
}

}  // namespace cohort

#endif  // COHORT_CLIENT_RESTART_WINDOW_H_

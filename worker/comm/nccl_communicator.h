// NCCL all-reduce over every GPU of a job, for GPU workers: one process per
// node drives all of its GPUs (one communicator rank per GPU, created in one
// NCCL group), and the NCCL unique ids travel through the coordinator's KV
// store (the same generation-scoped store that bootstraps Gloo).
//
// Two algorithms:
//   kFlat          one communicator over every GPU of every node; a single
//                  ncclAllReduce per GPU.
//   kHierarchical  reduce within the node to its first GPU, all-reduce
//                  among the nodes' first GPUs, broadcast within the node:
//                  one cross-node stream per node instead of one per GPU.
//
// Several collectives may be in flight at once: a trainer enqueues one
// AllReduceSum per gradient bucket (each on streams that first wait for the
// bucket's backward event), then one Wait, or none at all when the GPU-side
// ordering suffices (its compute stream waits for an event recorded on the
// communication streams) and it only wants errors: Wait after the stream
// is synchronized returns at once, with the failure if there was one.
//
// Failure: communicators are created non-blocking, so nothing NCCL does can
// block a caller for good. A non-blocking call may return before NCCL has
// put its kernels on the streams (ncclInProgress); AllReduceSum polls until
// they are there (within the timeout), so that the events it records, and
// anything a caller orders after the call on those streams, come after the
// collective. A watchdog thread polls every communicator's asynchronous
// error and the age of the oldest collective not yet finished (each timed
// from its own enqueue); on an error, on the timeout, or on Abort() (a
// generation change) it aborts every communicator, which makes the kernels
// in flight return, and every later call fails with the first reason. So
// does an AllReduceSum that NCCL refuses halfway: the job's ranks would no
// longer issue matching collectives.
//
// Ownership: owns its communicators, CUDA events and watchdog thread;
// borrows buffers and streams per call. Thread safety: every method may be
// called from any thread (a mutex orders them; Abort waits for an
// AllReduceSum being enqueued, at most the timeout). The collectives of one
// job must still be enqueued in the same order on every process.
#ifndef COHORT_WORKER_COMM_NCCL_COMMUNICATOR_H_
#define COHORT_WORKER_COMM_NCCL_COMMUNICATOR_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/kv_client.h"

namespace cohort {

// Where this process's GPUs sit in the job.
struct NcclTopology {
  int node_rank = 0;  // this process among the job's worker processes
  int num_nodes = 1;
  int first_rank = 0;  // global rank of devices[0] (the worker's first replica)
  int world_ranks = 1;       // GPUs in the whole job
  std::vector<int> devices;  // this process's CUDA device ordinals
};

struct NcclOptions {
  enum class Algorithm { kFlat, kHierarchical };
  Algorithm algorithm = Algorithm::kFlat;
  // Bounds creating the communicators and every collective.
  absl::Duration timeout = absl::Seconds(30);
  // Prefixes every KV key (the job's generation scope is the client's).
  std::string key_prefix = "nccl/";
  // How often the watchdog looks.
  absl::Duration poll_interval = absl::Milliseconds(20);
};

// "flat" or "hierarchical"; INVALID_ARGUMENT naming the value otherwise.
absl::StatusOr<NcclOptions::Algorithm> ParseNcclAlgorithm(
    const std::string& name);

class NcclCommunicator {
 public:
  // Creates the communicators (every process of the job must call this
  // with the same options). Fails within options.timeout, naming what it
  // waited for, if a peer never arrives.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      KvClient& kv, const NcclTopology& topology, const NcclOptions& options);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Enqueues an in-place sum of buffers[i] (count floats on devices[i])
  // over every GPU of the job, on streams[i] (one NCCL group over the local
  // GPUs); returns once NCCL has put it on the streams, so that work the
  // caller queues on them afterwards runs after it. The calling thread's
  // current device is left as it was.
  absl::Status AllReduceSum(const std::vector<float*>& buffers, int64_t count,
                            const std::vector<cudaStream_t>& streams);
  // Blocks until every collective enqueued so far has finished on every
  // local GPU, whatever streams they ran on, or the communicators were
  // aborted (then the reason).
  absl::Status Wait();
  // Aborts every communicator; later calls fail with `why`.
  void Abort(const absl::Status& why);

  const NcclTopology& topology() const { return topology_; }

 private:
  struct Device;
  // One enqueued collective: an event per local GPU, recorded on its
  // stream after the collective.
  struct Collective {
    std::vector<cudaEvent_t> done;
    absl::Time enqueued;
  };
  NcclCommunicator(const NcclTopology& topology, const NcclOptions& options);
  absl::Status Init(KvClient& kv);
  absl::Status AllReduceFlat(const std::vector<float*>& buffers, int64_t count,
                             const std::vector<cudaStream_t>& streams);
  absl::Status AllReduceHierarchical(const std::vector<float*>& buffers,
                                     int64_t count,
                                     const std::vector<cudaStream_t>& streams);
  // Polls until every communicator finished initializing.
  absl::Status AwaitInit(absl::Time deadline);
  // `r` from an NCCL call on `comms`: when ncclInProgress, polls them until
  // NCCL is done with the call (within the timeout); `what` names the call.
  absl::Status Settle(ncclResult_t r, const std::vector<ncclComm_t>& comms,
                      absl::string_view what);
  // The local GPUs' communicators (kFlat: world; kHierarchical: node).
  std::vector<ncclComm_t> LocalComms() const;
  // The first asynchronous NCCL error of any communicator, if any.
  absl::Status AsyncError();
  // An event per local GPU, reused or created.
  absl::StatusOr<std::vector<cudaEvent_t>> TakeEventsLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the collectives that have finished from the front of pending_.
  void PopFinishedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AbortLocked(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WatchdogLoop();
  absl::Status Failure() const;
  // Every communicator of this process (local or world, and the leader's).
  std::vector<ncclComm_t> Comms() const;
  void DestroyComms();

  const NcclTopology topology_;
  const NcclOptions options_;
  std::vector<Device> devices_;
  ncclComm_t leader_comm_ = nullptr;  // hierarchical, on devices[0]

  mutable absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  // Enqueued and not yet seen finished, oldest first.
  std::deque<Collective> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<cudaEvent_t>> spare_events_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watchdog_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_COMM_NCCL_COMMUNICATOR_H_

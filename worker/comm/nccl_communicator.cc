#include "worker/comm/nccl_communicator.h"

#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"

namespace cohort {

struct NcclCommunicator::Device {
  int ordinal = 0;
  // kFlat: the world communicator; kHierarchical: the node's.
  ncclComm_t comm = nullptr;
};

namespace {

absl::Status NcclStatus(ncclResult_t r, absl::string_view what) {
  if (r == ncclSuccess || r == ncclInProgress) return absl::OkStatus();
  const std::string message =
      absl::StrCat(what, ": NCCL: ", ncclGetErrorString(r));
  switch (r) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(message);
    case ncclRemoteError:
    case ncclSystemError:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

// A unique id travels as hex text through the KV store.
absl::StatusOr<ncclUniqueId> ShareUniqueId(KvClient& kv, const std::string& key,
                                           bool create,
                                           absl::Duration timeout) {
  ncclUniqueId id;
  if (create) {
    RETURN_IF_ERROR(NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    RETURN_IF_ERROR(kv.Set(key, absl::BytesToHexString(absl::string_view(
                                    id.internal, sizeof(id.internal)))));
    return id;
  }
  RETURN_IF_ERROR(kv.Wait({key}, timeout));
  ASSIGN_OR_RETURN(std::optional<std::string> hex, kv.Get(key));
  const std::string bytes = hex ? absl::HexStringToBytes(*hex) : "";
  if (bytes.size() != sizeof(id.internal)) {
    return absl::DataLossError(
        absl::StrCat("NCCL unique id under ", key, " has ", bytes.size(),
                     " bytes, not ", sizeof(id.internal)));
  }
  std::memcpy(id.internal, bytes.data(), bytes.size());
  return id;
}

// Whether the GPU has passed `event`. A query that finds it pending leaves
// cudaErrorNotReady as the thread's last error, which the next launch check
// (LaunchStatus) on this thread would report: clear it.
bool EventDone(cudaEvent_t event) {
  if (cudaEventQuery(event) != cudaErrorNotReady) return true;
  if (cudaPeekAtLastError() == cudaErrorNotReady) cudaGetLastError();
  return false;
}

ncclConfig_t NonBlockingConfig() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

}  // namespace

absl::StatusOr<NcclOptions::Algorithm> ParseNcclAlgorithm(
    const std::string& name) {
  if (name == "flat") return NcclOptions::Algorithm::kFlat;
  if (name == "hierarchical") return NcclOptions::Algorithm::kHierarchical;
  return absl::InvalidArgumentError(absl::StrCat(
      "NCCL algorithm must be flat or hierarchical, got \"", name, "\""));
}

NcclCommunicator::NcclCommunicator(const NcclTopology& topology,
                                   const NcclOptions& options)
    : topology_(topology), options_(options) {}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    KvClient& kv, const NcclTopology& t, const NcclOptions& options) {
  const int local = static_cast<int>(t.devices.size());
  if (local < 1 || t.num_nodes < 1 || t.node_rank < 0 ||
      t.node_rank >= t.num_nodes || t.first_rank < 0 ||
      t.first_rank + local > t.world_ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL topology: node ", t.node_rank, " of ", t.num_nodes,
                     " with ", local, " GPUs from global rank ", t.first_rank,
                     " of ", t.world_ranks, " does not fit"));
  }
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator(t, options));
  absl::Status s = c->Init(kv);
  if (!s.ok()) {
    c->Abort(s);
    return s;
  }
  c->watchdog_ = std::thread([raw = c.get()] { raw->WatchdogLoop(); });
  return c;
}

absl::Status NcclCommunicator::Init(KvClient& kv) {
  const absl::Time deadline = absl::Now() + options_.timeout;
  const bool flat = options_.algorithm == NcclOptions::Algorithm::kFlat;
  const int local = static_cast<int>(topology_.devices.size());
  devices_.resize(local);
  for (int i = 0; i < local; ++i) {
    devices_[i].ordinal = topology_.devices[i];
    RETURN_IF_ERROR(
        CudaStatus(cudaSetDevice(devices_[i].ordinal),
                   absl::StrCat("cudaSetDevice(", devices_[i].ordinal, ")")));
  }
  // Flat: one id for the whole job, from global rank 0. Hierarchical: a
  // node-local id (no exchange needed) and one for the node leaders.
  ncclUniqueId id;
  if (flat) {
    ASSIGN_OR_RETURN(
        id, ShareUniqueId(kv, options_.key_prefix + "flat",
                          topology_.first_rank == 0, options_.timeout));
  } else {
    RETURN_IF_ERROR(NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"));
  }
  ncclConfig_t config = NonBlockingConfig();
  absl::Status s = NcclStatus(ncclGroupStart(), "ncclGroupStart");
  for (int i = 0; s.ok() && i < local; ++i) {
    s = CudaStatus(cudaSetDevice(devices_[i].ordinal), "cudaSetDevice");
    if (!s.ok()) break;
    const int nranks = flat ? topology_.world_ranks : local;
    const int rank = flat ? topology_.first_rank + i : i;
    s = NcclStatus(
        ncclCommInitRankConfig(&devices_[i].comm, nranks, id, rank, &config),
        absl::StrCat("ncclCommInitRank (GPU ", devices_[i].ordinal, ", rank ",
                     rank, " of ", nranks, ")"));
  }
  const absl::Status end = NcclStatus(ncclGroupEnd(), "ncclGroupEnd");
  RETURN_IF_ERROR(s);
  RETURN_IF_ERROR(end);
  if (!flat && topology_.num_nodes > 1) {
    ncclUniqueId leaders;
    ASSIGN_OR_RETURN(leaders,
                     ShareUniqueId(kv, options_.key_prefix + "leaders",
                                   topology_.node_rank == 0, options_.timeout));
    RETURN_IF_ERROR(
        CudaStatus(cudaSetDevice(devices_[0].ordinal), "cudaSetDevice"));
    RETURN_IF_ERROR(NcclStatus(
        ncclCommInitRankConfig(&leader_comm_, topology_.num_nodes, leaders,
                               topology_.node_rank, &config),
        "ncclCommInitRank (node leaders)"));
  }
  return AwaitInit(deadline);
}

std::vector<ncclComm_t> NcclCommunicator::LocalComms() const {
  std::vector<ncclComm_t> comms;
  for (const Device& d : devices_) comms.push_back(d.comm);
  return comms;
}

std::vector<ncclComm_t> NcclCommunicator::Comms() const {
  std::vector<ncclComm_t> comms;
  for (const Device& d : devices_) {
    if (d.comm != nullptr) comms.push_back(d.comm);
  }
  if (leader_comm_ != nullptr) comms.push_back(leader_comm_);
  return comms;
}

absl::Status NcclCommunicator::AwaitInit(absl::Time deadline) {
  while (true) {
    bool pending = false;
    for (ncclComm_t comm : Comms()) {
      ncclResult_t state = ncclSuccess;
      RETURN_IF_ERROR(NcclStatus(ncclCommGetAsyncError(comm, &state),
                                 "ncclCommGetAsyncError"));
      if (state == ncclInProgress) {
        pending = true;
      } else {
        RETURN_IF_ERROR(NcclStatus(state, "creating NCCL communicators"));
      }
    }
    if (!pending) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("NCCL communicators not ready after ",
                       absl::FormatDuration(options_.timeout), " (node ",
                       topology_.node_rank, " of ", topology_.num_nodes,
                       "): a peer process never joined"));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
}

absl::Status NcclCommunicator::Failure() const {
  absl::MutexLock lock(&mu_);
  return failure_;
}

absl::Status NcclCommunicator::Settle(ncclResult_t r,
                                      const std::vector<ncclComm_t>& comms,
                                      absl::string_view what) {
  if (r != ncclInProgress) return NcclStatus(r, what);
  const absl::Time deadline = absl::Now() + options_.timeout;
  for (ncclComm_t comm : comms) {
    ncclResult_t state = ncclInProgress;
    while (true) {
      RETURN_IF_ERROR(NcclStatus(ncclCommGetAsyncError(comm, &state),
                                 "ncclCommGetAsyncError"));
      if (state != ncclInProgress) break;
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat(what, ": NCCL still enqueuing after ",
                         absl::FormatDuration(options_.timeout),
                         ": a peer is dead or stalled"));
      }
      std::this_thread::yield();
    }
    RETURN_IF_ERROR(NcclStatus(state, what));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<cudaEvent_t>> NcclCommunicator::TakeEventsLocked() {
  if (!spare_events_.empty()) {
    std::vector<cudaEvent_t> events = std::move(spare_events_.back());
    spare_events_.pop_back();
    return events;
  }
  std::vector<cudaEvent_t> events;
  for (const Device& d : devices_) {
    cudaEvent_t e = nullptr;
    const absl::Status s = OnDevice(d.ordinal, [&] {
      return CudaStatus(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                        absl::StrCat("cudaEventCreate on GPU ", d.ordinal));
    });
    if (!s.ok()) {
      for (cudaEvent_t made : events) cudaEventDestroy(made);
      return s;
    }
    events.push_back(e);
  }
  return events;
}

absl::Status NcclCommunicator::AllReduceSum(
    const std::vector<float*>& buffers, int64_t count,
    const std::vector<cudaStream_t>& streams) {
  if (buffers.size() != devices_.size() || streams.size() != devices_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NCCL all-reduce: ", buffers.size(), " buffers and ", streams.size(),
        " streams for ", devices_.size(), " GPUs"));
  }
  if (count < 0) {
    return absl::InvalidArgumentError("NCCL all-reduce: negative count");
  }
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(failure_);
  ASSIGN_OR_RETURN(std::vector<cudaEvent_t> events, TakeEventsLocked());
  absl::Status s = options_.algorithm == NcclOptions::Algorithm::kFlat
                       ? AllReduceFlat(buffers, count, streams)
                       : AllReduceHierarchical(buffers, count, streams);
  for (size_t i = 0; s.ok() && i < devices_.size(); ++i) {
    s = CudaStatus(cudaEventRecord(events[i], streams[i]),
                   absl::StrCat("cudaEventRecord after the all-reduce on GPU ",
                                devices_[i].ordinal));
  }
  if (!s.ok()) {
    spare_events_.push_back(std::move(events));
    // Part of the job's collective may be enqueued: the ranks no longer
    // match, so fail fast everywhere rather than hang.
    AbortLocked(s);
    return s;
  }
  pending_.push_back(Collective{std::move(events), absl::Now()});
  return absl::OkStatus();
}

absl::Status NcclCommunicator::AllReduceFlat(
    const std::vector<float*>& buffers, int64_t count,
    const std::vector<cudaStream_t>& streams) {
  RETURN_IF_ERROR(NcclStatus(ncclGroupStart(), "ncclGroupStart"));
  absl::Status s;
  for (size_t i = 0; s.ok() && i < devices_.size(); ++i) {
    s = NcclStatus(ncclAllReduce(buffers[i], buffers[i], count, ncclFloat32,
                                 ncclSum, devices_[i].comm, streams[i]),
                   "ncclAllReduce");
  }
  const absl::Status end =
      Settle(ncclGroupEnd(), LocalComms(), "ncclGroupEnd (all-reduce)");
  return s.ok() ? end : s;
}

// Reduce to the node's first GPU, all-reduce among the nodes' first GPUs
// (on its stream, so it starts after the local reduce), broadcast back.
absl::Status NcclCommunicator::AllReduceHierarchical(
    const std::vector<float*>& buffers, int64_t count,
    const std::vector<cudaStream_t>& streams) {
  RETURN_IF_ERROR(NcclStatus(ncclGroupStart(), "ncclGroupStart"));
  absl::Status s;
  for (size_t i = 0; s.ok() && i < devices_.size(); ++i) {
    s = NcclStatus(ncclReduce(buffers[i], buffers[i], count, ncclFloat32,
                              ncclSum, 0, devices_[i].comm, streams[i]),
                   "ncclReduce (node)");
  }
  absl::Status end =
      Settle(ncclGroupEnd(), LocalComms(), "ncclGroupEnd (node reduce)");
  RETURN_IF_ERROR(s);
  RETURN_IF_ERROR(end);
  if (leader_comm_ != nullptr) {
    RETURN_IF_ERROR(
        Settle(ncclAllReduce(buffers[0], buffers[0], count, ncclFloat32,
                             ncclSum, leader_comm_, streams[0]),
               {leader_comm_}, "ncclAllReduce (node leaders)"));
  }
  RETURN_IF_ERROR(NcclStatus(ncclGroupStart(), "ncclGroupStart"));
  for (size_t i = 0; s.ok() && i < devices_.size(); ++i) {
    s = NcclStatus(ncclBroadcast(buffers[i], buffers[i], count, ncclFloat32, 0,
                                 devices_[i].comm, streams[i]),
                   "ncclBroadcast (node)");
  }
  end = Settle(ncclGroupEnd(), LocalComms(), "ncclGroupEnd (node broadcast)");
  return s.ok() ? end : s;
}

// Collectives finish in the order they were enqueued on a stream; across
// streams a later one may finish first, but it leaves pending_ only behind
// the older ones, so the front is always the oldest unfinished collective.
void NcclCommunicator::PopFinishedLocked() {
  while (!pending_.empty()) {
    Collective& c = pending_.front();
    for (cudaEvent_t e : c.done) {
      if (!EventDone(e)) return;
    }
    spare_events_.push_back(std::move(c.done));
    pending_.pop_front();
  }
}

absl::Status NcclCommunicator::AsyncError() {
  for (ncclComm_t comm : Comms()) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return NcclStatus(r, "ncclCommGetAsyncError");
    if (state != ncclSuccess && state != ncclInProgress) {
      return NcclStatus(state, "NCCL collective");
    }
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Wait() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      RETURN_IF_ERROR(failure_);
      PopFinishedLocked();
      if (pending_.empty()) return absl::OkStatus();
    }
    // The watchdog turns errors and timeouts into failure_; a short sleep
    // keeps this loop cheap without adding much latency.
    absl::SleepFor(absl::Microseconds(50));
  }
}

void NcclCommunicator::WatchdogLoop() {
  while (true) {
    absl::Status why;
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_),
                               options_.poll_interval)) {
        return;
      }
      if (!failure_.ok()) continue;
      why = AsyncError();
      if (why.ok()) {
        PopFinishedLocked();
        if (!pending_.empty() &&
            absl::Now() - pending_.front().enqueued > options_.timeout) {
          why = absl::DeadlineExceededError(absl::StrCat(
              "NCCL all-reduce did not finish within ",
              absl::FormatDuration(options_.timeout), " (", pending_.size(),
              " collective(s) pending): a peer is dead or stalled"));
        }
      }
      if (!why.ok()) AbortLocked(why);
    }
  }
}

void NcclCommunicator::Abort(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  AbortLocked(why);
}

void NcclCommunicator::AbortLocked(const absl::Status& why) {
  if (!failure_.ok()) return;
  failure_ = why.ok() ? absl::AbortedError("NCCL communicator aborted") : why;
  // Aborting makes every kernel in flight on these communicators return.
  for (ncclComm_t comm : Comms()) ncclCommAbort(comm);
  for (Device& d : devices_) d.comm = nullptr;
  leader_comm_ = nullptr;
  // Nothing is waited for any more; the events are destroyed with us.
  for (Collective& c : pending_) spare_events_.push_back(std::move(c.done));
  pending_.clear();
}

void NcclCommunicator::DestroyComms() {
  // Finalize flushes what is in flight; a communicator that does not
  // finish within the timeout is aborted instead.
  const absl::Time deadline = absl::Now() + options_.timeout;
  std::vector<ncclComm_t> comms = Comms();
  for (ncclComm_t comm : comms) ncclCommFinalize(comm);
  for (ncclComm_t comm : comms) {
    ncclResult_t state = ncclInProgress;
    while (ncclCommGetAsyncError(comm, &state) == ncclSuccess &&
           state == ncclInProgress && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    if (state == ncclSuccess) {
      ncclCommDestroy(comm);
    } else {
      ncclCommAbort(comm);
    }
  }
}

NcclCommunicator::~NcclCommunicator() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (watchdog_.joinable()) watchdog_.join();
  bool healthy;
  {
    absl::MutexLock lock(&mu_);
    healthy = failure_.ok();
  }
  if (healthy) DestroyComms();
  absl::MutexLock lock(&mu_);
  for (Collective& c : pending_) spare_events_.push_back(std::move(c.done));
  pending_.clear();
  for (const std::vector<cudaEvent_t>& events : spare_events_) {
    for (cudaEvent_t e : events) cudaEventDestroy(e);
  }
}

}  // namespace cohort

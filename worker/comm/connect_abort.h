// Ends, from another thread, a Gloo connect that waits for a peer which
// will never dial in.
//
// Gloo (Debian's 2022-05 snapshot) opens one listening socket per peer and,
// on the listening side of a pair, waits for the peer to connect for the
// whole context timeout; nothing interrupts that wait. When a generation
// ends while its workers connect (a peer left to rejoin, or died after
// publishing its address), a worker in that wait would sit out the timeout
// instead of rejoining. While a ConnectAbort::Scope is alive on a thread,
// every socket that thread puts into the listening state is recorded (Gloo
// creates a context's pairs on the thread that connects it); Abort() shuts
// them down, which fails the waiting pair at once, and refuses listening
// sockets the thread opens afterwards.
//
// This module defines listen(2) for the process; outside a Scope it is the
// C library's.
//
// Thread safety: Abort() and status() may be called from any thread, at
// any time while the object lives; a Scope belongs to the thread that made
// it. Ownership: the object owns the duplicates of the recorded sockets and
// closes them when the Scope ends.
#ifndef COHORT_WORKER_COMM_CONNECT_ABORT_H_
#define COHORT_WORKER_COMM_CONNECT_ABORT_H_

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace cohort {

class ConnectAbort {
 public:
  ConnectAbort() = default;
  ~ConnectAbort();
  ConnectAbort(const ConnectAbort&) = delete;
  ConnectAbort& operator=(const ConnectAbort&) = delete;

  // Fails the connect in progress (and any later one) with `why`; the first
  // status wins. An OK `why` counts as ABORTED.
  void Abort(const absl::Status& why);
  // OK until Abort.
  absl::Status status() const;

  // Records the listening sockets of the calling thread while alive. A null
  // `abort` records nothing.
  class Scope {
   public:
    explicit Scope(ConnectAbort* abort);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    ConnectAbort* const abort_;
    ConnectAbort* const previous_;
  };

  // For the process's listen(2): listens on `fd` unless aborted (-1 with
  // ECONNABORTED then), and records the socket.
  int Listen(int fd, int backlog);

 private:
  void CloseRecorded();

  mutable absl::Mutex mu_;
  absl::Status why_ ABSL_GUARDED_BY(mu_);
  // Duplicates of the listening sockets: Gloo closes its own descriptor
  // once the peer is accepted, after which the number may name another
  // file; a duplicate names the same socket until it is closed.
  std::vector<int> recorded_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort

#endif  // COHORT_WORKER_COMM_CONNECT_ABORT_H_

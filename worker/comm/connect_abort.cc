#include "worker/comm/connect_abort.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace cohort {
namespace {

thread_local ConnectAbort* t_current = nullptr;

using ListenFn = int (*)(int, int);

ListenFn LibcListen() {
  static const ListenFn real =
      reinterpret_cast<ListenFn>(dlsym(RTLD_NEXT, "listen"));
  return real;
}

}  // namespace

ConnectAbort::~ConnectAbort() { CloseRecorded(); }

void ConnectAbort::Abort(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (why_.ok()) why_ = why.ok() ? absl::AbortedError("aborted") : why;
  // A listening socket shut down wakes Gloo's event loop, whose accept then
  // fails, and the pair waiting on it throws.
  for (int fd : recorded_) ::shutdown(fd, SHUT_RDWR);
}

absl::Status ConnectAbort::status() const {
  absl::MutexLock lock(&mu_);
  return why_;
}

int ConnectAbort::Listen(int fd, int backlog) {
  // Under the lock, so that an Abort either sees this socket listening or
  // has already refused it: no socket starts listening unrecorded.
  absl::MutexLock lock(&mu_);
  if (!why_.ok()) {
    errno = ECONNABORTED;
    return -1;
  }
  const int rv = LibcListen()(fd, backlog);
  if (rv != 0) return rv;
  const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy >= 0) recorded_.push_back(copy);
  return rv;
}

void ConnectAbort::CloseRecorded() {
  absl::MutexLock lock(&mu_);
  for (int fd : recorded_) ::close(fd);
  recorded_.clear();
}

ConnectAbort::Scope::Scope(ConnectAbort* abort)
    : abort_(abort), previous_(t_current) {
  if (abort_ != nullptr) t_current = abort_;
}

ConnectAbort::Scope::~Scope() {
  if (abort_ == nullptr) return;
  t_current = previous_;
  abort_->CloseRecorded();
}

}  // namespace cohort

// Interposes the C library's listen for the whole process (the executable's
// definition comes first in symbol lookup, libgloo's calls included).
extern "C" int listen(int fd, int backlog) {
  if (cohort::t_current == nullptr) {
    return cohort::LibcListen()(fd, backlog);
  }
  return cohort::t_current->Listen(fd, backlog);
}

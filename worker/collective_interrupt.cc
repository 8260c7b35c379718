#include "worker/collective_interrupt.h"

namespace cohort {

void CollectiveInterrupt::Attach(Communicator* comm) {
  absl::MutexLock lock(&mu_);
  comm_ = comm;
  if (!why_.ok() && comm_ != nullptr) comm_->Abort(why_);
}

void CollectiveInterrupt::Attach(ConnectAbort* connect) {
  absl::MutexLock lock(&mu_);
  connect_ = connect;
  if (!why_.ok() && connect_ != nullptr) connect_->Abort(why_);
}

void CollectiveInterrupt::Detach() {
  absl::MutexLock lock(&mu_);
  comm_ = nullptr;
  connect_ = nullptr;
}

void CollectiveInterrupt::Interrupt(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (why_.ok()) why_ = why.ok() ? absl::AbortedError("interrupted") : why;
  if (comm_ != nullptr) comm_->Abort(why_);
  if (connect_ != nullptr) connect_->Abort(why_);
}

}  // namespace cohort

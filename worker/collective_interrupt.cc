#include "worker/collective_interrupt.h"

namespace cohort {

void CollectiveInterrupt::Attach(Communicator* comm) {
  absl::MutexLock lock(&mu_);
  comm_ = comm;
  if (!why_.ok() && comm_ != nullptr) comm_->Abort(why_);
}

void CollectiveInterrupt::Detach() {
  absl::MutexLock lock(&mu_);
  comm_ = nullptr;
}

void CollectiveInterrupt::Interrupt(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (why_.ok()) why_ = why.ok() ? absl::AbortedError("interrupted") : why;
  if (comm_ != nullptr) comm_->Abort(why_);
}

}  // namespace cohort

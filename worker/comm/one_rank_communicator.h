// The world of one rank: every all-reduce is the identity, so a codec's
// encoding, arithmetic and decoding run exactly as they would in a job,
// without peers (tests/compression_torch_test compares them with
// PyTorch's; bench/compression_codec times them).
//
// Stateless; thread-safe.
#ifndef COHORT_WORKER_COMM_ONE_RANK_COMMUNICATOR_H_
#define COHORT_WORKER_COMM_ONE_RANK_COMMUNICATOR_H_

#include <cstdint>
#include <memory>

#include "worker/comm/communicator.h"

namespace cohort {

class OneRankCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  absl::Status AllReduceSum(float*, int64_t) override {
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<AllReducePlan>> PlanAllReduceSum(
      float*, int64_t, int) override {
    return std::unique_ptr<AllReducePlan>(new NoopPlan);
  }
  absl::StatusOr<std::unique_ptr<AllReducePlan>> PlanAllReduceSum16(
      uint16_t*, int64_t, int, HalfFormat) override {
    return std::unique_ptr<AllReducePlan>(new NoopPlan);
  }

 private:
  class NoopPlan : public AllReducePlan {
   public:
    absl::Status Run() override { return absl::OkStatus(); }
  };
};

}  // namespace cohort

#endif  // COHORT_WORKER_COMM_ONE_RANK_COMMUNICATOR_H_

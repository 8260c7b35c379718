#include "worker/comm/communicator.h"

#include "common/logging.h"

namespace cohort {
namespace {

class DirectPlan : public AllReducePlan {
 public:
  DirectPlan(Communicator* comm, float* data, int64_t count)
      : comm_(comm), data_(data), count_(count) {}
  absl::Status Run() override { return comm_->AllReduceSum(data_, count_); }

 private:
  Communicator* const comm_;
  float* const data_;
  const int64_t count_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<AllReducePlan>> Communicator::PlanAllReduceSum(
    float* data, int64_t count, int lane) {
  CHECK_EQ(lane, 0) << "this communicator has one lane";
  return std::unique_ptr<AllReducePlan>(new DirectPlan(this, data, count));
}

absl::StatusOr<std::unique_ptr<AllReducePlan>> Communicator::PlanAllReduceSum16(
    uint16_t*, int64_t, int, HalfFormat) {
  return absl::UnimplementedError(
      "this communicator cannot all-reduce 16-bit floats");
}

}  // namespace cohort

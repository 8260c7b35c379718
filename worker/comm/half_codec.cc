#include "worker/comm/half_codec.h"

#include <utility>

#include "common/logging.h"
#include "common/status_macros.h"

namespace cohort {

absl::Status HalfCodec::Bind(Communicator* comm, int index, float* data,
                             int64_t, int64_t count, int lane) {
  if (index == 0) buckets_.clear();
  CHECK_EQ(index, static_cast<int>(buckets_.size()))
      << "buckets bound out of order";
  limit_ = Fp16FloorValue(kFp16Max / comm->size());
  Bucket bucket;
  bucket.data = data;
  bucket.words.resize(count);
  ASSIGN_OR_RETURN(bucket.plan, comm->PlanAllReduceSum16(bucket.words.data(),
                                                         count, lane, format_));
  buckets_.push_back(std::move(bucket));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> HalfCodec::Reduce(int index, float scale) {
  Bucket& b = buckets_[index];
  const int64_t n = static_cast<int64_t>(b.words.size());
  FloatToHalf(format_, b.data, scale, limit_, b.words.data(), n);
  RETURN_IF_ERROR(b.plan->Run());
  HalfToFloat(format_, b.words.data(), b.data, n);
  return n * int64_t{sizeof(uint16_t)};
}

}  // namespace cohort

// HalfCodec: buckets averaged in 16-bit floats (CompressionSpec FP16 and
// BF16), half the bytes of floats. Like PyTorch's fp16_compress_hook and
// bf16_compress_hook: each rank's bucket, already divided by the number of
// replicas, is rounded to 16 bits and the 16-bit values are summed. FP16
// terms are bounded by the largest half not above 65504 / ranks, so no sum
// can overflow: a gradient element that large saturates instead of
// becoming infinite. No error feedback (neither hook has one).
//
// Owns one 16-bit buffer and one plan per bucket. Thread safety: as
// BucketCodec.
#ifndef COHORT_WORKER_COMM_HALF_CODEC_H_
#define COHORT_WORKER_COMM_HALF_CODEC_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "common/half_convert.h"
#include "worker/comm/bucket_codec.h"

namespace cohort {

class HalfCodec : public BucketCodec {
 public:
  explicit HalfCodec(HalfFormat format) : format_(format) {}

  absl::Status Bind(Communicator* comm, int index, float* data, int64_t begin,
                    int64_t count, int lane) override;
  void BeginStep(int64_t) override {}
  absl::StatusOr<int64_t> Reduce(int index, float scale) override;

 private:
  struct Bucket {
    float* data = nullptr;
    std::vector<uint16_t> words;
    std::unique_ptr<AllReducePlan> plan;
  };

  const HalfFormat format_;
  float limit_ = kFp16Max;  // per-rank bound (FP16)
  std::vector<Bucket> buckets_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_COMM_HALF_CODEC_H_

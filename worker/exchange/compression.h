// The bucket codec a job's CompressionSpec asks for (worker/comm/
// half_codec.h, worker/comm/powersgd_codec.h), built for one model.
#ifndef COHORT_WORKER_EXCHANGE_COMPRESSION_H_
#define COHORT_WORKER_EXCHANGE_COMPRESSION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "proto/job.pb.h"
#include "worker/comm/bucket_codec.h"
#include "worker/comm/powersgd_codec.h"

namespace cohort {

// Null for kind NONE. `tensors`: the model's parameters in flat-buffer
// order; `count`: the buffer's length; `seed`: the job's (the first
// PowerSGD factors are drawn from it, the same on every worker).
std::unique_ptr<BucketCodec> MakeBucketCodec(const CompressionSpec& spec,
                                             uint64_t seed,
                                             std::vector<FlatTensor> tensors,
                                             int64_t count, int local_replicas);

// "POWERSGD rank 4 after 10 steps" etc., for the worker's start line.
std::string DescribeCompression(const CompressionSpec& spec);

}  // namespace cohort

#endif  // COHORT_WORKER_EXCHANGE_COMPRESSION_H_

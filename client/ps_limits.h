// Size limits of the parameter-server protocol (proto/ps.proto), shared by
// the shard and the worker's client so both cut and accept the same chunks.
#ifndef COHORT_CLIENT_PS_LIMITS_H_
#define COHORT_CLIENT_PS_LIMITS_H_

#include <cstdint>

namespace cohort {

// The most tensor data one TensorChunk carries. Small enough that no message
// nears gRPC's limits, large enough that per-message overhead is negligible.
inline constexpr int64_t kMaxChunkBytes = 1 << 20;

// The shard's and the client's gRPC receive limit: a chunk plus room for the
// rest of the message, so gRPC refuses anything much bigger
// (RESOURCE_EXHAUSTED) before it is parsed. gRPC 1.51 still reads such a
// message's bytes off the connection first: the shard's Pull and Push keep
// their memory bounded by refusing a caller without the job's token before
// the body is read (server/gated_service.h).
inline constexpr int kMaxMessageBytes = kMaxChunkBytes + (64 << 10);

// Bounds on what a request may declare, so that no arithmetic on it can
// overflow and no declared size can make a shard allocate without limit
// (found by fuzz/shard_fuzzer.cc).
// Workers in a job (the coordinator's own limit) and replicas in all.
inline constexpr int32_t kMaxWorldSize = 4096;
inline constexpr int32_t kMaxTotalReplicas = kMaxWorldSize * 256;
// Parameters one shard may hold: 2^31 floats (8 GiB).
inline constexpr int64_t kMaxShardElements = int64_t{1} << 31;
// Steps (clocks) and data chunks a job may count to: far beyond any real
// run, and small enough that clock * kMaxTotalReplicas fits in 63 bits.
inline constexpr int64_t kMaxClock = int64_t{1} << 40;
inline constexpr int64_t kMaxChunk = kMaxClock * kMaxTotalReplicas;

}  // namespace cohort

#endif  // COHORT_CLIENT_PS_LIMITS_H_

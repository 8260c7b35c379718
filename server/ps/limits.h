// Size limits of the parameter-server protocol (proto/ps.proto), shared by
// the shard and the worker's client so both cut and accept the same chunks.
#ifndef COHORT_SERVER_PS_LIMITS_H_
#define COHORT_SERVER_PS_LIMITS_H_

#include <cstdint>

namespace cohort {

// The most tensor data one TensorChunk carries. Small enough that no message
// nears gRPC's limits, large enough that per-message overhead is negligible.
inline constexpr int64_t kMaxChunkBytes = 1 << 20;

// The shard's and the client's gRPC receive limit: a chunk plus room for the
// rest of the message, so gRPC itself refuses anything much bigger
// (RESOURCE_EXHAUSTED) before it is buffered.
inline constexpr int kMaxMessageBytes = kMaxChunkBytes + (64 << 10);

}  // namespace cohort

#endif  // COHORT_SERVER_PS_LIMITS_H_

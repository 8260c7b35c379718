// Multi-head scaled dot-product attention on the CPU engine's channel-major
// sequence layout (worker/layers/layer.h), forward and backward.
//
// Every buffer is a {rows, N * L} row-major matrix whose column n * L + t is
// sample n's position t. `qkv` is the fused in-projection's output {3D, NL}:
// rows [0, D) are Q, [D, 2D) K, [2D, 3D) V, head h owning rows
// h * dh .. (h + 1) * dh of each (dh = D / H). For one (sample, head) the
// scores are S = scale * Q^T K (L x L), P = softmax over each row (the row's
// maximum subtracted first), optionally a causal mask (query i sees keys
// j <= i) and dropout on P, and the head's output rows are O = V P^T. All
// products are kernels/gemm.h calls with strides straight on these buffers;
// nothing is transposed or copied per head. The buffers' row stride is the
// caller's (AttentionDims::stride): AttentionStride(N * L) pads it, since
// at the usual sizes N * L is a power of two, which maps all the rows of a
// head onto a few L1 sets and makes the small products thrash.
//
// Blocking: queries are processed in blocks of kQueryBlock rows, so one
// block's scores (kQueryBlock x L) stay in L2 between the score product,
// the softmax and the value product. Causal attention computes, for a block
// of queries [i0, i1), only the keys [0, i1): key blocks wholly above the
// diagonal are never touched, which halves the work against a full L x L
// product (what PyTorch 1.13's nn.MultiheadAttention does).
//
// What backward needs: the probabilities P themselves (before dropout), for
// every (sample, head): N * H * L * L values (rows padded) in AttentionCache,
// plus the caller's dropout keep-mask. Keeping P costs memory (8 MiB in float
// for N = 8, H = 4, L = 256) but spares backward a second score product and the
// exponentials; for L in the thousands a log-sum-exp recompute would be the
// better trade.
//
// Dropout: the caller draws `keep` (one byte per (n, h, i, j), row-major
// {N, H, L, L}; only j <= i is read when causal) and passes the
// keep scale 1 / (1 - p); null `keep` means no dropout.
//
// Plain functions over raw pointers (does not depend on worker/): the cache
// is the caller's, reused across steps. Thread safety: reentrant for
// distinct caches and outputs. Instantiated for float and double.
#ifndef COHORT_KERNELS_ATTENTION_H_
#define COHORT_KERNELS_ATTENTION_H_

#include <cstdint>
#include <vector>

namespace cohort {

// Queries per block (see above).
inline constexpr int64_t kQueryBlock = 64;

struct AttentionDims {
  int64_t batch = 0;   // N
  int64_t length = 0;  // L
  int64_t dim = 0;     // D
  int64_t heads = 1;   // H, divides D
  bool causal = true;
  // Row stride (elements) of qkv, out, grad_out and grad_qkv; 0: N * L.
  int64_t stride = 0;
};

// A row stride >= `columns` (N * L) that spreads rows over the L1 sets.
int64_t AttentionStride(int64_t columns);

template <typename T>
struct AttentionCache {
  std::vector<T> probs;    // {N, H, L, L}: P, rows padded (see .cc)
  std::vector<T> scratch;  // up to two query blocks' scores
};

// out {D, NL} = the heads' outputs, concatenated by rows (head h in rows
// h * dh ..), before the out-projection. Fills cache->probs.
template <typename T>
void AttentionForward(const AttentionDims& d, const T* qkv, const uint8_t* keep,
                      T keep_scale, T* out, AttentionCache<T>* cache);

// Given grad_out {D, NL} (dLoss/d out of the last forward with the same
// `qkv`, `keep` and cache), overwrites grad_qkv {3D, NL}.
template <typename T>
void AttentionBackward(const AttentionDims& d, const T* qkv,
                       const uint8_t* keep, T keep_scale, const T* grad_out,
                       T* grad_qkv, AttentionCache<T>* cache);

}  // namespace cohort

#endif  // COHORT_KERNELS_ATTENTION_H_

// The counter-based random numbers of dropout, shared bit-for-bit by the
// CUDA kernels (kernels/cuda/ops.cu, compiled by nvcc) and the CPU reference
// (kernels/cuda/ops_reference.cc, compiled by gcc).
//
// Element i of a dropout call with (seed, offset) is decided by the counter
// offset + i alone: no generator state, so any thread computes any element,
// a tensor split in two calls (offset 0 and offset k) gets the same mask as
// one call, and the backward pass regenerates the mask instead of storing it.
//
// The hash is SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom
// number generators", OOPSLA 2014; the generator behind java.util.
// SplittableRandom): output = Mix(key + (counter + 1) * golden), where the
// key is Mix(seed), so that seeds which differ by a multiple of the golden
// gamma do not give shifted copies of one stream. Mix is SplitMix64's
// finalizer (David Stafford's "Mix13"), a bijection of 64-bit words.
//
// Plain C++ (no CUDA headers): COHORT_HD marks the functions __host__
// __device__ under nvcc only. Stateless, so thread-safe.
#ifndef COHORT_KERNELS_CUDA_DROPOUT_RNG_H_
#define COHORT_KERNELS_CUDA_DROPOUT_RNG_H_

#include <cstdint>

#if defined(__CUDACC__)
#define COHORT_HD __host__ __device__
#else
#define COHORT_HD
#endif

namespace cohort {

// SplitMix64's finalizer: a bijection that spreads every input bit over
// the whole output.
COHORT_HD inline uint64_t SplitMix64Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// 64 random bits for `counter` in the stream of `seed`.
COHORT_HD inline uint64_t DropoutHash(uint64_t seed, uint64_t counter) {
  const uint64_t key = SplitMix64Mix(seed);
  return SplitMix64Mix(key + (counter + 1) * 0x9e3779b97f4a7c15ull);
}

// Whether the element with `counter` is kept: its 32-bit uniform (the high
// half of the hash) is at least `threshold`, which DropoutThreshold(p)
// gives, so an element is dropped with probability threshold / 2^32 = p
// (exact to 2^-32), as the CPU Dropout layer draws it.
COHORT_HD inline bool DropoutKeep(uint64_t seed, uint64_t counter,
                                  uint64_t threshold) {
  return (DropoutHash(seed, counter) >> 32) >= threshold;
}

// floor(p * 2^32) for p in [0, 1): the drop threshold of DropoutKeep. Host
// code computes it once per call (multiplying by 2^32 is exact in double).
inline uint64_t DropoutThreshold(double p) {
  return static_cast<uint64_t>(p * 4294967296.0);
}

}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_DROPOUT_RNG_H_

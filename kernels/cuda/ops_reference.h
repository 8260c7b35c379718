// CPU reference versions of the CUDA kernels in kernels/cuda/ops.h whose
// results must match bit-for-bit: 16-bit float conversions and dropout
// masks. Plain C++ with no CUDA headers, so it builds in every
// configuration (--config=nocuda included) and the CPU engine can use it.
//
// 16-bit formats are carried as their bit patterns in uint16_t:
//   bf16: 1 sign, 8 exponent, 7 mantissa bits (the top half of a float);
//   fp16: IEEE binary16, 1 sign, 5 exponent (bias 15), 10 mantissa bits.
// Float-to-16-bit conversions round to nearest, ties to even, as the CUDA
// intrinsics __float2bfloat16_rn / __float2half_rn do: overflow rounds to
// infinity, tiny values to (signed) zero or a subnormal, and any NaN becomes
// the canonical NaN 0x7fff that CUDA's conversions produce. Widening to
// float is exact (NaN payloads kept).
//
// Thread safety: stateless functions.
#ifndef COHORT_KERNELS_CUDA_OPS_REFERENCE_H_
#define COHORT_KERNELS_CUDA_OPS_REFERENCE_H_

#include <cstdint>

namespace cohort {

uint16_t Bf16FromFloat(float x);
float FloatFromBf16(uint16_t h);
uint16_t Fp16FromFloat(float x);
float FloatFromFp16(uint16_t h);

// The keep-mask of a dropout call over `n` elements (1 = kept, 0 =
// dropped), exactly as gpu::DropoutForward draws it: element i is kept iff
// DropoutKeep(seed, offset + i, DropoutThreshold(p)) (kernels/cuda/
// dropout_rng.h). `p` must be in [0, 1).
void DropoutMaskReference(uint64_t seed, uint64_t offset, int64_t n, double p,
                          uint8_t* mask);

}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_OPS_REFERENCE_H_

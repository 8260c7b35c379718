#include "kernels/cuda/ops_reference.h"

#include <cstring>

#include "kernels/cuda/dropout_rng.h"

namespace cohort {
namespace {

constexpr uint16_t kCanonicalNan = 0x7fff;  // what CUDA's conversions give

uint32_t BitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
}

float FloatOf(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

// `value >> shift` rounded to nearest, ties to even, for 1 <= shift <= 31.
// A carry out of the kept bits is the right answer: it moves a mantissa of
// all ones to the next power of two (next exponent, or infinity).
uint32_t ShiftRightRoundEven(uint32_t value, int shift) {
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  return kept + (rest > half || (rest == half && (kept & 1)) ? 1 : 0);
}

}  // namespace

uint16_t Bf16FromFloat(float x) {
  const uint32_t u = BitsOf(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return kCanonicalNan;
  // bf16 is the top half of a float: rounding the low 16 bits away handles
  // normals, subnormals, overflow to infinity and infinities alike (the
  // sign bit rides along untouched because the magnitude cannot carry
  // into it: the largest finite float rounds to infinity, 0x7f80).
  return static_cast<uint16_t>((u & 0x80000000u) >> 16 |
                               ShiftRightRoundEven(u & 0x7fffffffu, 16));
}

float FloatFromBf16(uint16_t h) {
  return FloatOf(static_cast<uint32_t>(h) << 16);
}

uint16_t Fp16FromFloat(float x) {
  const uint32_t u = BitsOf(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return kCanonicalNan;
  const int exponent = static_cast<int>(magnitude >> 23) - 127;  // unbiased
  if (exponent > 15) return sign | 0x7c00u;  // too large, or infinity
  if (exponent >= -14) {
    // A normal fp16: rebias the exponent (127 -> 15) and round 23 mantissa
    // bits to 10. Rounding up past 0x7bff (65504) gives 0x7c00, infinity.
    const uint32_t rebased =
        magnitude - (static_cast<uint32_t>(127 - 15) << 23);
    return sign | static_cast<uint16_t>(ShiftRightRoundEven(rebased, 13));
  }
  // Subnormal fp16 (or zero): the value is m * 2^-24. With the implicit
  // bit, the float is mant * 2^(exponent - 23), so m = mant * 2^(exponent +
  // 1), a right shift by -(exponent + 1). Below 2^-25 (shift > 24, float
  // subnormals included) everything rounds to zero; exactly 2^-25 is a tie
  // that rounds to the even zero, which the shift by 24 gets right.
  const int shift = -(exponent + 1);
  if (shift > 24) return sign;
  const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  // A carry to m = 0x400 is the smallest normal's encoding: still right.
  return sign | static_cast<uint16_t>(ShiftRightRoundEven(mantissa, shift));
}

float FloatFromFp16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {  // infinity, or NaN with its payload kept
    return FloatOf(sign | 0x7f800000u | mantissa << 13);
  }
  if (exponent == 0) {
    // Zero or subnormal, m * 2^-24: exact in float (m < 2^10).
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  return FloatOf(sign | (exponent + (127 - 15)) << 23 | mantissa << 13);
}

void DropoutMaskReference(uint64_t seed, uint64_t offset, int64_t n, double p,
                          uint8_t* mask) {
  const uint64_t threshold = DropoutThreshold(p);
  for (int64_t i = 0; i < n; ++i) {
    mask[i] =
        DropoutKeep(seed, offset + static_cast<uint64_t>(i), threshold) ? 1 : 0;
  }
}

}  // namespace cohort

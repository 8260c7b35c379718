#include "common/half_convert.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace cohort {
namespace {

// Round to nearest even by adding just under half a unit of the 16 bits
// dropped; NaN keeps a mantissa bit so that it cannot round into infinity.
inline uint16_t Bf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float Bf16Value(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Every machine this project targets has AVX2 and with it F16C (the build
// requires AVX2), whose conversions round as IEEE requires.
inline __m256 LoadHalf8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline void StoreHalf8(uint16_t* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                   _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

inline float Fp16Value(uint16_t h) { return _cvtsh_ss(h); }

inline uint16_t Fp16Bits(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

// std::clamp would turn NaN into a bound; NaN passes through here.
inline float Clamp(float v, float limit) {
  return v > limit ? limit : (v < -limit ? -limit : v);
}

void FloatToFp16(const float* in, float scale, float limit, uint16_t* out,
                 int64_t n) {
  int64_t i = 0;
  const __m256 s = _mm256_set1_ps(scale);
  const __m256 hi = _mm256_set1_ps(limit);
  const __m256 lo = _mm256_set1_ps(-limit);
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(in + i), s);
    // min/max return their second operand for NaN: v stays NaN.
    v = _mm256_min_ps(hi, v);
    v = _mm256_max_ps(lo, v);
    StoreHalf8(out + i, v);
  }
  for (; i < n; ++i) out[i] = Fp16Bits(Clamp(in[i] * scale, limit));
}

// Bf16Bits on 8 lanes: the same rounding and NaN rule, in integers.
inline __m128i Bf16Bits8(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb =
      _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
  const __m256i magnitude = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan =
      _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(u, _mm256_set1_epi32(0x400000));
  const __m256i bits =
      _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, nan), 16);
  // Each 128-bit lane packs its 4 words twice; keep one copy of each.
  const __m256i packed = _mm256_packus_epi32(bits, bits);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0xd8));
}

inline __m256 LoadBf16x8(const uint16_t* p) {
  const __m256i words = _mm256_cvtepu16_epi32(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(words, 16));
}

void FloatToBf16(const float* in, float scale, uint16_t* out, int64_t n) {
  int64_t i = 0;
  const __m256 s = _mm256_set1_ps(scale);
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     Bf16Bits8(_mm256_mul_ps(_mm256_loadu_ps(in + i), s)));
  }
  for (; i < n; ++i) out[i] = Bf16Bits(in[i] * scale);
}

}  // namespace

void FloatToHalf(HalfFormat format, const float* in, float scale, float limit,
                 uint16_t* out, int64_t n) {
  if (format == HalfFormat::kFp16) {
    FloatToFp16(in, scale, std::min(limit, kFp16Max), out, n);
  } else {
    FloatToBf16(in, scale, out, n);
  }
}

void HalfToFloat(HalfFormat format, const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  if (format == HalfFormat::kFp16) {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, LoadHalf8(in + i));
    for (; i < n; ++i) out[i] = Fp16Value(in[i]);
  } else {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, LoadBf16x8(in + i));
    for (; i < n; ++i) out[i] = Bf16Value(in[i]);
  }
}

void SumHalf(HalfFormat format, uint16_t* acc, const uint16_t* in, int64_t n) {
  int64_t i = 0;
  if (format == HalfFormat::kFp16) {
    for (; i + 8 <= n; i += 8) {
      StoreHalf8(acc + i, _mm256_add_ps(LoadHalf8(acc + i), LoadHalf8(in + i)));
    }
    for (; i < n; ++i) acc[i] = Fp16Bits(Fp16Value(acc[i]) + Fp16Value(in[i]));
  } else {
    for (; i + 8 <= n; i += 8) {
      _mm_storeu_si128(
          reinterpret_cast<__m128i*>(acc + i),
          Bf16Bits8(_mm256_add_ps(LoadBf16x8(acc + i), LoadBf16x8(in + i))));
    }
    for (; i < n; ++i) acc[i] = Bf16Bits(Bf16Value(acc[i]) + Bf16Value(in[i]));
  }
}

float Fp16FloorValue(float x) {
  uint16_t h = Fp16Bits(x);
  // Rounding may have gone up; step down one unit (x > 0 here).
  if (Fp16Value(h) > x) --h;
  return Fp16Value(h);
}

}  // namespace cohort

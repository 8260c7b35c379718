// 16-bit floats for gradients on the wire: IEEE half (FP16) and bfloat16
// (BF16), both rounded to nearest even as PyTorch's .to(float16) and
// .to(bfloat16) round, and sums of two such buffers computed in float and
// rounded once, as Gloo and NCCL add 16-bit floats.
//
// Stateless and reentrant; the caller owns every buffer.
#ifndef COHORT_COMMON_HALF_CONVERT_H_
#define COHORT_COMMON_HALF_CONVERT_H_

#include <cstdint>

namespace cohort {

enum class HalfFormat { kFp16, kBf16 };

// The largest finite FP16 value.
constexpr float kFp16Max = 65504.0f;

// out[i] = round(clamp(in[i] * scale, -limit, limit)). `limit` matters for
// FP16 only (pass kFp16Max or less: values past it would become infinite);
// BF16 has float's range. NaN stays NaN.
void FloatToHalf(HalfFormat format, const float* in, float scale, float limit,
                 uint16_t* out, int64_t n);
// out[i] = in[i] exactly.
void HalfToFloat(HalfFormat format, const uint16_t* in, float* out, int64_t n);
// acc[i] = round(float(acc[i]) + float(in[i])).
void SumHalf(HalfFormat format, uint16_t* acc, const uint16_t* in, int64_t n);

// The largest FP16 value not above `x` (0 < x <= kFp16Max): a per-rank
// bound whose sum over `ranks` ranks stays finite.
float Fp16FloorValue(float x);

}  // namespace cohort

#endif  // COHORT_COMMON_HALF_CONVERT_H_

#include "worker/comm/half_words.h"

namespace cohort {
namespace {

void SumFp16(Fp16Word* acc, const Fp16Word* in, size_t n) {
  SumHalf(HalfFormat::kFp16, &acc->bits, &in->bits, static_cast<int64_t>(n));
}

void SumBf16(Bf16Word* acc, const Bf16Word* in, size_t n) {
  SumHalf(HalfFormat::kBf16, &acc->bits, &in->bits, static_cast<int64_t>(n));
}

}  // namespace

const gloo::ReductionFunction<Fp16Word>* Fp16Sum() {
  static const auto* sum =
      new gloo::ReductionFunction<Fp16Word>(gloo::SUM, &SumFp16);
  return sum;
}

const gloo::ReductionFunction<Bf16Word>* Bf16Sum() {
  static const auto* sum =
      new gloo::ReductionFunction<Bf16Word>(gloo::SUM, &SumBf16);
  return sum;
}

}  // namespace cohort

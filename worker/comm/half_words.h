// 16-bit float words as Gloo element types: Gloo's algorithms move and add
// them like any T, with these sums (float addition rounded once, in
// common/half_convert.h) instead of Gloo's per-element float16 operator.
#ifndef COHORT_WORKER_COMM_HALF_WORDS_H_
#define COHORT_WORKER_COMM_HALF_WORDS_H_

#include <cstdint>

#include "common/half_convert.h"
#include "gloo/algorithm.h"

namespace cohort {

struct Fp16Word {
  uint16_t bits;
};
struct Bf16Word {
  uint16_t bits;
};
static_assert(sizeof(Fp16Word) == 2 && sizeof(Bf16Word) == 2);

// Static instances; never null.
const gloo::ReductionFunction<Fp16Word>* Fp16Sum();
const gloo::ReductionFunction<Bf16Word>* Bf16Sum();

}  // namespace cohort

#endif  // COHORT_WORKER_COMM_HALF_WORDS_H_

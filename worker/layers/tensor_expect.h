// A GoogleTest check for the unit tests of the CPU engine: two float
// tensors of one shape, element by element, within a tolerance relative to
// the larger of 1 and the largest |want|, so that sums of many products are
// judged at their own scale. Test-only.
#ifndef COHORT_WORKER_LAYERS_TENSOR_EXPECT_H_
#define COHORT_WORKER_LAYERS_TENSOR_EXPECT_H_

#include <algorithm>
#include <cmath>

#include "common/tensor.h"
#include "gtest/gtest.h"

namespace cohort {

// max |got - want| <= rtol * max(1, max |want|); names `what` and the first
// element that is off.
inline void ExpectTensorsClose(const Tensor& got, const Tensor& want,
                               double rtol, const char* what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  double scale = 1;
  for (int64_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  for (int64_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rtol * scale) << what << " " << i;
  }
}

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_TENSOR_EXPECT_H_

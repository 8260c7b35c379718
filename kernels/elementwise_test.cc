// The fused sum-and-activation kernels against Add and the separate
// activation kernels in turn, bit for bit, float and double, with the
// activations' edges (0, -0, 6, the values next to 6, NaN) among the sums.
#include "kernels/elementwise.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/activations.h"
#include "kernels/bit_difference.h"

namespace cohort {
namespace {

// a + b, with b = 0 where a holds an edge value, so that the sums hit them.
template <typename T>
void Operands(int64_t n, std::vector<T>* a, std::vector<T>* b,
              std::vector<T>* dy) {
  std::mt19937_64 rng(n);
  std::normal_distribution<double> normal(0, 1);
  for (int64_t i = 0; i < n; ++i) {
    a->push_back(static_cast<T>(3 + 4 * normal(rng)));
    b->push_back(static_cast<T>(normal(rng)));
    dy->push_back(static_cast<T>(normal(rng)));
  }
  const T edges[] = {T(0),
                     T(-0.0),
                     T(6),
                     std::nextafter(T(6), T(7)),
                     std::nextafter(T(6), T(5)),
                     std::numeric_limits<T>::quiet_NaN()};
  for (int k = 0; k < 6; ++k) (*a)[k * 5] = edges[k], (*b)[k * 5] = T(0);
}

template <typename T>
void ExpectFusedEqualsSeparate(FusedActivation act) {
  // 37: vectors and a scalar tail.
  std::vector<T> a, b, dy;
  Operands<T>(37, &a, &b, &dy);
  const int64_t n = a.size();
  std::vector<T> sum(n), want(n), got(n), g_want(n), g_got(n);
  Add(a.data(), b.data(), sum.data(), n);
  if (act == FusedActivation::kRelu) {
    ReluForward(sum.data(), want.data(), n);
    ReluBackward(sum.data(), dy.data(), g_want.data(), n);
  } else {
    ActivationForward(ActivationKind::kRelu6, T(0), sum.data(), want.data(), n);
    ActivationBackward(ActivationKind::kRelu6, T(0), sum.data(), dy.data(),
                       g_want.data(), n);
  }
  AddActivated(a.data(), b.data(), act, got.data(), n);
  EXPECT_EQ(FirstBitDifference(got, want), -1) << "forward";
  ActivationGradFromOutput(got.data(), dy.data(), act, g_got.data(), n);
  EXPECT_EQ(FirstBitDifference(g_got, g_want), -1) << "gradient";
}

TEST(Elementwise, FusedActivationGivesTheBitsOfTheSeparateSteps) {
  for (FusedActivation act :
       {FusedActivation::kRelu, FusedActivation::kRelu6}) {
    SCOPED_TRACE(static_cast<int>(act));
    ExpectFusedEqualsSeparate<float>(act);
    ExpectFusedEqualsSeparate<double>(act);
  }
}

TEST(Elementwise, AddActivatedWithoutActivationIsAdd) {
  std::vector<float> a, b, dy;
  Operands<float>(37, &a, &b, &dy);
  std::vector<float> want(a.size()), got = a;
  Add(a.data(), b.data(), want.data(), a.size());
  AddActivated(got.data(), b.data(), FusedActivation::kNone, got.data(),
               a.size());  // in place
  EXPECT_EQ(FirstBitDifference(got, want), -1);
}

}  // namespace
}  // namespace cohort

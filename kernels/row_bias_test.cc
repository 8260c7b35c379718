// The kernels that add a per-row bias in another pass (AddRowBias, the
// activations' RowBias forms) against the bias added first and then the
// plain kernel, bit for bit, for every activation, float and double.
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/activations.h"
#include "kernels/bit_difference.h"
#include "kernels/elementwise.h"

namespace cohort {
namespace {

constexpr ActivationKind kKinds[] = {
    ActivationKind::kGelu,     ActivationKind::kGeluTanh,
    ActivationKind::kSilu,     ActivationKind::kTanh,
    ActivationKind::kSigmoid,  ActivationKind::kLeakyRelu,
    ActivationKind::kRelu6,    ActivationKind::kHardsigmoid,
    ActivationKind::kHardswish};

template <typename T>
std::vector<T> Normal(int64_t n, double scale, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, scale);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(normal(rng));
  return v;
}

// in + bias[row], the bias broadcast first as a product's C would hold it.
template <typename T>
std::vector<T> Biased(const std::vector<T>& in, const std::vector<T>& bias,
                      int64_t cols) {
  std::vector<T> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = in[i] + bias[i / cols];
  return out;
}

template <typename T>
void ExpectRowBiasKernels(int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  const std::vector<T> in = Normal<T>(n, 3, 1), dy = Normal<T>(n, 1, 2),
                       r = Normal<T>(n, 1, 3), bias = Normal<T>(rows, 2, 4);
  const std::vector<T> x = Biased(in, bias, cols);
  std::vector<T> want(n), got(n);
  Add(r.data(), x.data(), want.data(), n);
  AddRowBias(r.data(), in.data(), bias.data(), rows, cols, got.data());
  EXPECT_EQ(FirstBitDifference(got, want), -1) << "AddRowBias";
  for (ActivationKind kind : kKinds) {
    SCOPED_TRACE(ActivationName(kind, 0.1));
    ActivationForward<T>(kind, T(0.1), x.data(), want.data(), n);
    ActivationForwardRowBias<T>(kind, T(0.1), in.data(), bias.data(), rows,
                                cols, got.data());
    EXPECT_EQ(FirstBitDifference(got, want), -1) << "forward";
    ActivationBackward<T>(kind, T(0.1), x.data(), dy.data(), want.data(), n);
    got = dy;  // in place, as the transformer block runs it
    ActivationBackwardRowBias<T>(kind, T(0.1), in.data(), bias.data(), rows,
                                 cols, got.data(), got.data());
    EXPECT_EQ(FirstBitDifference(got, want), -1) << "backward";
  }
}

TEST(RowBias, GivesTheBitsOfTheBiasAddedFirst) {
  // 37 columns: vectors and a scalar tail in every row.
  ExpectRowBiasKernels<float>(7, 37);
  ExpectRowBiasKernels<double>(7, 37);
}

TEST(RowBias, RowsSplitOverThreadsGiveTheSameBits) {
  // Enough rows of enough elements for the compute team to split them.
  ExpectRowBiasKernels<float>(64, 2048);
  ExpectRowBiasKernels<double>(16, 2048);
}

}  // namespace
}  // namespace cohort

// The dot-interaction kernels against the plain per-sample loop
// (kernels/interaction_reference.h): every output within a rounding bound
// scaled by its terms' magnitudes, for DLRM's shapes and for dims that are
// not a multiple of the vector width, one vector and one embedding, in
// float and double; nothing written outside the outputs; the same bits on
// one and two threads.
#include "kernels/interaction.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/interaction_reference.h"
#include "kernels/onednn_threads.h"

namespace cohort {
namespace {

struct Case {
  int64_t n, vectors, dim;
};

// Outputs past the batch, which no kernel may touch.
constexpr int kGuard = 16;

template <typename T>
std::vector<T> Uniform(int64_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<T> v(size + kGuard, T(7));
  for (int64_t i = 0; i < size; ++i) v[i] = static_cast<T>(u(rng));
  return v;
}

template <typename T>
std::vector<T> Abs(std::vector<T> v) {
  for (T& x : v) x = std::abs(x);
  return v;
}

// |got - want| <= 2 eps (terms + 1) magnitude, where `magnitude` is the
// same computation on absolute values: twice the classic bound on a sum's
// rounding in any order, with or without fused multiply-adds (both sides
// round). Past the outputs the guard values must be untouched.
template <typename T>
void ExpectClose(const std::vector<T>& got, const std::vector<T>& want,
                 const std::vector<T>& magnitude, int64_t terms,
                 const char* what, const Case& c) {
  const double eps = std::numeric_limits<T>::epsilon();
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::abs(double{got[i]} - double{want[i]}),
              2 * eps * (terms + 1) * std::abs(double{magnitude[i]}))
        << what << " " << c.n << " x " << c.vectors << " x " << c.dim << " at "
        << i << ": " << got[i] << " vs " << want[i];
  }
}

template <typename T>
void CheckAgainstReference(const Case& c) {
  namespace ref = interaction_reference;
  const int64_t in_size = c.n * c.vectors * c.dim;
  const int64_t out_size = c.n * DotInteractionOutputs(c.vectors, c.dim);
  const std::vector<T> x = Uniform<T>(in_size, 1), g = Uniform<T>(out_size, 2);
  const std::vector<T> ax = Abs(x), ag = Abs(g);
  std::vector<T> y(out_size + kGuard, T(-3)), y_ref = y, y_abs = y;
  DotInteractionForward(x.data(), c.n, c.vectors, c.dim, y.data());
  ref::Forward(x.data(), c.n, c.vectors, c.dim, y_ref.data());
  ref::Forward(ax.data(), c.n, c.vectors, c.dim, y_abs.data());
  ExpectClose(y, y_ref, y_abs, c.dim, "forward", c);

  // NaN where the kernel must overwrite: grad_x is an output, not a sum.
  std::vector<T> dx(in_size + kGuard, std::numeric_limits<T>::quiet_NaN());
  for (int i = 0; i < kGuard; ++i) dx[in_size + i] = T(-3);
  std::vector<T> dx_ref = dx, dx_abs = dx;
  DotInteractionBackward(x.data(), g.data(), c.n, c.vectors, c.dim, dx.data());
  ref::Backward(x.data(), g.data(), c.n, c.vectors, c.dim, dx_ref.data());
  ref::Backward(ax.data(), ag.data(), c.n, c.vectors, c.dim, dx_abs.data());
  ExpectClose(dx, dx_ref, dx_abs, c.vectors, "backward", c);
}

// DLRM's shapes, dims below, between and above the vector widths (8 floats,
// 4 doubles) and above the backward's chunk of 8 vectors, one vector (no
// pairs), one embedding (one pair), and batches that split into ranges on
// the compute threads.
const Case kCases[] = {
    {3, 27, 16}, {130, 27, 16}, {5, 27, 32}, {4, 27, 64}, {3, 1, 5},
    {3, 2, 1},   {3, 2, 3},     {2, 2, 16},  {3, 3, 7},   {2, 5, 8},
    {3, 9, 12},  {2, 13, 17},   {2, 10, 4},  {3, 11, 9},  {2, 26, 31},
    {2, 33, 6},  {70, 6, 20},   {2, 5, 40},  {2, 7, 70},  {2, 4, 130},
};

TEST(DotInteraction, FloatMatchesThePlainLoop) {
  for (const Case& c : kCases) CheckAgainstReference<float>(c);
}

TEST(DotInteraction, DoubleMatchesThePlainLoop) {
  for (const Case& c : kCases) CheckAgainstReference<double>(c);
}

TEST(DotInteraction, ExactOnSmallIntegers) {
  // v0 = (1, 2), v1 = (3, 4), v2 = (5, 6): products and sums are exact.
  const float x[] = {1, 2, 3, 4, 5, 6};
  float y[5];
  DotInteractionForward(x, 1, 3, 2, y);
  const float want[] = {1, 2, 11, 17, 39};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(y[i], want[i]) << i;
  const float g[] = {1, -1, 2, 3, 4};
  float dx[6];
  DotInteractionBackward(x, g, 1, 3, 2, dx);
  // dv0 = g0 + 2 v1 + 3 v2, dv1 = 2 v0 + 4 v2, dv2 = 3 v0 + 4 v1.
  const float want_dx[] = {22, 25, 22, 28, 15, 22};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(dx[i], want_dx[i]) << i;
}

template <typename T>
std::vector<T> RunOnThreads(int threads, const Case& c) {
  SetOnednnThreads(threads);
  const int64_t out_size = c.n * DotInteractionOutputs(c.vectors, c.dim);
  const std::vector<T> x = Uniform<T>(c.n * c.vectors * c.dim, 3);
  const std::vector<T> g = Uniform<T>(out_size, 4);
  std::vector<T> y(out_size), dx(c.n * c.vectors * c.dim);
  DotInteractionForward(x.data(), c.n, c.vectors, c.dim, y.data());
  DotInteractionBackward(x.data(), g.data(), c.n, c.vectors, c.dim, dx.data());
  SetOnednnThreads(0);
  y.insert(y.end(), dx.begin(), dx.end());
  return y;
}

TEST(DotInteraction, SameBitsOnOneAndTwoThreads) {
  const Case c = {300, 27, 13};
  EXPECT_EQ(RunOnThreads<float>(1, c), RunOnThreads<float>(2, c));
  EXPECT_EQ(RunOnThreads<double>(1, c), RunOnThreads<double>(2, c));
}

}  // namespace
}  // namespace cohort

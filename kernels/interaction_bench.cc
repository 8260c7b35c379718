// Microseconds per batch of the dot interaction, forward and backward, on
// DLRM's shapes (vectors x dim, batch), for the plain per-sample loop
// (kernels/interaction_reference.h) and the kernels of kernels/interaction.h,
// on one compute thread; also checks that the two agree. Prints medians of
// repeated calls.
//
//   bazel run -c opt //kernels:interaction_bench
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "kernels/interaction.h"
#include "kernels/interaction_reference.h"
#include "kernels/onednn_threads.h"

namespace cohort {
namespace {

// Median over repeated calls, repeated until about 0.2 s have passed.
double MedianUs(const std::function<void()>& f) {
  f();
  std::vector<double> t;
  double total = 0;
  while (t.size() < 5 || (total < 2e5 && t.size() < 1000)) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(
                    std::chrono::steady_clock::now() - a)
                    .count());
    total += t.back();
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// max |a - b| / max |b|.
double MaxRelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double scale = 1e-30, diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::abs(double{b[i]}));
    diff = std::max(diff, std::abs(double{a[i]} - b[i]));
  }
  return diff / scale;
}

struct Shape {
  int64_t vectors, dim, batch;
};

// Prints one row; false when the kernels disagree with the loop.
bool Run(const Shape& s, std::mt19937_64& rng) {
  namespace ref = interaction_reference;
  const int64_t in = s.batch * s.vectors * s.dim;
  const int64_t out = s.batch * DotInteractionOutputs(s.vectors, s.dim);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(in), g(out), y(out), y_ref(out), dx(in), dx_ref(in);
  for (float& v : x) v = normal(rng);
  for (float& v : g) v = normal(rng);
  const auto [v, d, n] = s;
  const double fwd_ref =
      MedianUs([&] { ref::Forward(x.data(), n, v, d, y_ref.data()); });
  const double fwd =
      MedianUs([&] { DotInteractionForward(x.data(), n, v, d, y.data()); });
  const double bwd_ref = MedianUs(
      [&] { ref::Backward(x.data(), g.data(), n, v, d, dx_ref.data()); });
  const double bwd = MedianUs(
      [&] { DotInteractionBackward(x.data(), g.data(), n, v, d, dx.data()); });
  const double diff = std::max(MaxRelDiff(y, y_ref), MaxRelDiff(dx, dx_ref));
  std::printf(
      "%4ld x %3ld %6ld | %10.1f %9.1f %6.1fx | %10.1f %9.1f %6.1fx"
      " | %.1e\n",
      v, d, n, fwd_ref, fwd, fwd_ref / fwd, bwd_ref, bwd, bwd_ref / bwd, diff);
  return diff < 1e-5;
}

}  // namespace
}  // namespace cohort

int main() {
  cohort::SetOnednnThreads(1);
  std::mt19937_64 rng(42);
  std::printf(
      "vectors x dim  batch |   fwd loop  fwd fast  speed |   bwd loop "
      " bwd fast  speed | max rel diff\n"
      "   (microseconds per batch, one thread, float)\n");
  const cohort::Shape shapes[] = {
      {27, 16, 64},   {27, 16, 128},  {27, 16, 4096},
      {27, 32, 1024}, {27, 64, 1024},
  };
  bool ok = true;
  for (const cohort::Shape& s : shapes) ok = cohort::Run(s, rng) && ok;
  if (!ok) std::printf("MISMATCH: the kernels disagree with the loop\n");
  return ok ? 0 : 1;
}

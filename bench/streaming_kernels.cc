// Memory speed of the kernels that stream through a whole model's worth of
// data each step: the optimizer's check of the gradient (sum of squares
// over ResNet-18's 11.7 M gradients) and the channel-blocked batch norm's
// passes at ResNet-50 shapes (batch 8, nChw16c). Each call starts with the
// data out of cache (a 256 MB buffer written between calls); median of 9
// calls on one thread, in GB/s of the bytes each pass must move.
//
//   streaming_kernels
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/batchnorm_blocked.h"
#include "worker/optim/grad_clip.h"

namespace {

void EvictCaches() {
  static std::vector<float> junk(int64_t{64} << 20, 1.0f);
  for (size_t i = 0; i < junk.size(); i += 16) junk[i] += 1.0f;
}

template <typename F>
double MedianMs(const F& f) {
  std::vector<double> ms;
  for (int i = 0; i < 9; ++i) {
    EvictCaches();
    const auto a = std::chrono::steady_clock::now();
    f();
    const auto b = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(b - a).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void Report(const char* name, double ms, double mbytes) {
  std::printf("  %-34s %7.2f ms  %5.1f GB/s\n", name, ms, mbytes / ms);
}

void BenchSumOfSquares() {
  const int64_t n = 11'700'000;
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i) g[i] = static_cast<float>(i % 97) * 1e-3f;
  double sink = 0;
  const double ms =
      MedianMs([&] { sink += cohort::SumOfSquares(g.data(), n); });
  std::printf("gradient check, %lld floats (sum %.3g)\n",
              static_cast<long long>(n), sink);
  Report("sum of squares (read 1)", ms, n * 4e-6);
}

void BenchBatchNorm(int64_t channels, int64_t side) {
  cohort::BlockedLayout l;
  l.batch = 8;
  l.channels = channels;
  l.spatial = side * side;
  l.block = 16;
  const int64_t n = l.batch * l.channels * l.spatial;
  std::vector<float> x(n), dy(n), y(n), dx(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 97) * 0.01f - 0.3f;
    dy[i] = static_cast<float>(i % 89) * 0.01f - 0.4f;
  }
  std::vector<float> mean(channels, 0.1f), a(channels, 1.0f), b(channels, 0.5f),
      d(channels, 0.1f);
  std::vector<double> s(channels), q(channels);
  const double mb = n * 4e-6;
  std::printf("batch norm, 8 x %lld x %lldx%lld (%.0f MB a tensor)\n",
              static_cast<long long>(channels), static_cast<long long>(side),
              static_cast<long long>(side), mb);
  Report("mean and variance (read 1)", MedianMs([&] {
           cohort::BlockedMeanVar(l, x.data(), 0, channels, s.data(), q.data());
         }),
         mb);
  // The ReLU's mask comes from x, with the scale and shift of the
  // normalization below.
  const cohort::ActivationInput<float> relu{a.data(), b.data()};
  Report("gradient sums, ReLU mask (read 2)", MedianMs([&] {
           cohort::BlockedGradSums(l, dy.data(), x.data(), relu, 0, channels,
                                   mean.data(), s.data(), q.data());
         }),
         2 * mb);
  Report("input gradient, ReLU mask (3)", MedianMs([&] {
           cohort::BlockedInputGrad(l, dy.data(), x.data(), relu, 0, channels,
                                    mean.data(), a.data(), b.data(), d.data(),
                                    dx.data());
         }),
         3 * mb);
  Report("normalize and ReLU (2)", MedianMs([&] {
           cohort::BlockedNormalize(l, x.data(), 0, channels, mean.data(),
                                    a.data(), b.data(), true, y.data());
         }),
         2 * mb);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    std::fprintf(stderr, "usage: %s (no arguments; got \"%s\")\n", argv[0],
                 argv[1]);
    return 2;
  }
  BenchSumOfSquares();
  BenchBatchNorm(256, 56);
  BenchBatchNorm(512, 28);
  BenchBatchNorm(64, 112);
  return 0;
}

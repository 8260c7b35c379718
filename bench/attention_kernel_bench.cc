// The attention core alone (kernels/attention.h, no projections): gpt_tiny's
// shape, N = 8, L = 256, D = 256, 4 heads, causal, no dropout; forward and
// backward per call, best of 5 x 20, wall-clock ms on the OpenMP team that
// OMP_NUM_THREADS sizes.
//
//   OMP_NUM_THREADS=2 attention_kernel_bench [HEADS]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/attention.h"

namespace {

double WallMs() { return omp_get_wtime() * 1e3; }

}  // namespace

int main(int argc, char** argv) {
  cohort::AttentionDims d;
  d.batch = 8;
  d.length = 256;
  d.dim = 256;
  d.heads = argc > 1 ? std::atoi(argv[1]) : 4;
  d.causal = true;
  d.stride = cohort::AttentionStride(d.batch * d.length);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> qkv(3 * d.dim * d.stride), out(d.dim * d.stride);
  std::vector<float> grad_out(out.size()), grad_qkv(qkv.size());
  for (float& x : qkv) x = normal(rng);
  for (float& x : grad_out) x = normal(rng);
  cohort::AttentionCache<float> cache;
  double forward = 1e30, backward = 1e30;
  for (int r = 0; r < 5; ++r) {
    double f = 0, b = 0;
    for (int i = 0; i < 20; ++i) {
      const double t0 = WallMs();
      cohort::AttentionForward<float>(d, qkv.data(), nullptr, 1.0f, out.data(),
                                      &cache);
      const double t1 = WallMs();
      cohort::AttentionBackward<float>(d, qkv.data(), nullptr, 1.0f,
                                       grad_out.data(), grad_qkv.data(),
                                       &cache);
      f += t1 - t0;
      b += WallMs() - t1;
    }
    forward = std::min(forward, f / 20);
    backward = std::min(backward, b / 20);
  }
  std::printf(
      "attention core N=8 L=256 D=256 heads %lld causal, %d threads: "
      "forward %.3f ms, backward %.3f ms\n",
      static_cast<long long>(d.heads), omp_get_max_threads(), forward,
      backward);
  return 0;
}

// The attention core alone (kernels/attention.h, no projections): gpt_tiny's
// shape, N = 8, L = 256, D = 256, 4 heads, causal, no dropout; forward plus
// backward per call, best of 5 x 20, this thread's CPU ms.
//
//   attention_kernel_bench [HEADS]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/attention.h"

namespace {

double CpuMs() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

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
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const double t0 = CpuMs();
    for (int i = 0; i < 20; ++i) {
      cohort::AttentionForward<float>(d, qkv.data(), nullptr, 1.0f, out.data(),
                                      &cache);
      cohort::AttentionBackward<float>(d, qkv.data(), nullptr, 1.0f,
                                       grad_out.data(), grad_qkv.data(),
                                       &cache);
    }
    best = std::min(best, (CpuMs() - t0) / 20);
  }
  std::printf("attention core N=8 L=256 D=256 heads %lld causal: %.3f ms\n",
              static_cast<long long>(d.heads), best);
  return 0;
}

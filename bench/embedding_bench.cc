// The embedding layer's forward (gather + transpose into the channel-major
// {D, N, L} output) and backward (scatter-add into the weight gradient) at
// gpt_tiny's sizes, against the plain column-by-column loops, in one run.
//
//   bazel run -c opt //bench:embedding_bench -- [N [L [D [V]]]]
//
// Checks that both give the same numbers, warms up, repeats, and prints the
// median time and the bytes of activations per second (the D x N x L
// floats written, or read).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "worker/layers/embedding.h"
#include "worker/layers/param_store.h"

namespace cohort {
namespace {

template <typename F>
double MedianSeconds(F&& f, int reps) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - a)
            .count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int Run(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 16;
  const int64_t l = argc > 2 ? std::atoll(argv[2]) : 256;
  const int64_t d = argc > 3 ? std::atoll(argv[3]) : 256;
  const int64_t v = argc > 4 ? std::atoll(argv[4]) : 256;
  const int64_t cols = n * l;
  Embedding<float> layer(v, d);
  if (!layer.Configure({1, l}).ok()) return 2;
  ParamStore<float> store;
  Layer<float>* layers[] = {&layer};
  store.Build(layers);
  Rng rng(1);
  store.Initialize(rng);
  Tensor ids({1, n, l}), out, grad_out({d, n, l});
  std::uniform_int_distribution<int> id(0, static_cast<int>(v) - 1);
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < ids.size(); ++i) ids[i] = id(rng);
  for (int64_t i = 0; i < grad_out.size(); ++i) grad_out[i] = normal(rng);
  const float* w = store.values().data();

  std::vector<float> plain_out(d * cols), plain_grad(v * d);
  auto plain_forward = [&] {
    for (int64_t j = 0; j < cols; ++j) {
      const float* row = w + static_cast<int64_t>(ids[j]) * d;
      for (int64_t k = 0; k < d; ++k) plain_out[k * cols + j] = row[k];
    }
  };
  auto plain_backward = [&] {
    std::fill(plain_grad.begin(), plain_grad.end(), 0.0f);
    for (int64_t j = 0; j < cols; ++j) {
      float* row = plain_grad.data() + static_cast<int64_t>(ids[j]) * d;
      for (int64_t k = 0; k < d; ++k) row[k] += grad_out[k * cols + j];
    }
  };
  auto forward = [&] { layer.Forward(ids, &out, Mode::kTrain); };
  auto backward = [&] { layer.Backward(grad_out, nullptr); };

  forward();
  backward();
  plain_forward();
  plain_backward();
  for (int64_t i = 0; i < out.size(); ++i) {
    if (out[i] != plain_out[i]) {
      std::fprintf(stderr, "forward differs at %lld\n",
                   static_cast<long long>(i));
      return 1;
    }
  }
  for (int64_t i = 0; i < v * d; ++i) {
    if (store.grads()[i] != plain_grad[i]) {
      std::fprintf(stderr, "backward differs at %lld\n",
                   static_cast<long long>(i));
      return 1;
    }
  }
  const int reps = 50;
  const double bytes = 4.0 * d * cols;
  const double f = MedianSeconds(forward, reps);
  const double pf = MedianSeconds(plain_forward, reps);
  const double b = MedianSeconds(backward, reps);
  const double pb = MedianSeconds(plain_backward, reps);
  std::printf("embedding(%lld, %lld) on N=%lld L=%lld, median of %d\n",
              static_cast<long long>(v), static_cast<long long>(d),
              static_cast<long long>(n), static_cast<long long>(l), reps);
  std::printf("forward   layer %8.1f us (%5.2f GB/s)  plain %8.1f us  %.2fx\n",
              f * 1e6, bytes / f / 1e9, pf * 1e6, pf / f);
  std::printf("backward  layer %8.1f us (%5.2f GB/s)  plain %8.1f us  %.2fx\n",
              b * 1e6, bytes / b / 1e9, pb * 1e6, pb / b);
  return 0;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) { return cohort::Run(argc, argv); }

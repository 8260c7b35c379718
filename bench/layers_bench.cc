// Milliseconds per forward + backward of the activation, norm and 1-D
// pooling layers on the CPU engine, float32, one thread (or THREADS), next to
// relu and batchnorm2d on the same tensor (the yardsticks they replace in a
// recipe), and the attention and transformer block (D 256, 4 heads, L 256,
// batch 8):
//   bazel build //bench:layers_bench
//   bazel-bin/bench/layers_bench [FILTER [THREADS]]
// bench/layers_torch.py prints PyTorch's times for the same cases.
#include <cblas.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "google/protobuf/text_format.h"
#include "worker/compute_threads.h"
#include "worker/layers/param_store.h"
#include "worker/zoo.h"

namespace cohort {
namespace {

struct Case {
  const char* layer;
  Shape sample;
  int64_t batch = 64;
};

// This thread's CPU time in ms: on a shared machine it counts only the time
// we ran (wall time also counts other processes' turns).
double CpuMs() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

struct Times {
  double wall = -1, cpu = -1;  // ms per forward + backward, best of 5
};

Times Run(const Case& c, int64_t n) {
  ModelSpec spec;
  google::protobuf::TextFormat::ParseFromString(c.layer, spec.add_layers());
  auto layers = BuildLayers<float>(spec);
  if (!layers.ok()) return {};
  Layer<float>& layer = *(*layers)[0];
  if (!layer.Configure(c.sample).ok()) return {};
  ParamStore<float> store;
  Layer<float>* list[] = {&layer};
  store.Build(list);
  Rng rng(1);
  store.Initialize(rng);
  Shape batch =
      c.sample.size() == 1 ? Shape{n, c.sample[0]} : Shape{c.sample[0], n};
  for (size_t i = 1; i < c.sample.size(); ++i) batch.push_back(c.sample[i]);
  Tensor x(batch), y, dx;
  std::normal_distribution<float> normal(0, 1);
  for (int64_t i = 0; i < x.size(); ++i) x[i] = normal(rng);
  layer.Forward(x, &y, Mode::kTrain);
  Tensor dy(y.shape());
  for (int64_t i = 0; i < dy.size(); ++i) dy[i] = normal(rng);
  Times best{1e30, 1e30};
  for (int rep = 0; rep < 5; ++rep) {
    const int iters = 10;
    const double cpu0 = CpuMs();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      layer.Forward(x, &y, Mode::kTrain);
      layer.Backward(dy, &dx);
    }
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - t0)
                          .count() /
                      iters;
    best.wall = std::min(best.wall, ms);
    best.cpu = std::min(best.cpu, (CpuMs() - cpu0) / iters);
  }
  return best;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  // An argument keeps only the cases whose layer text contains it.
  const std::string only = argc > 1 ? argv[1] : "";
  long threads = 1;
  if (argc > 2) {
    char* end = nullptr;
    threads = std::strtol(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0' || threads < 1 || threads > 64) {
      std::fprintf(stderr,
                   "layers_bench: THREADS (the second argument) must be a "
                   "whole number from 1 to 64, got \"%s\"\n",
                   argv[2]);
      return 2;
    }
  }
  if (argc > 3) {
    std::fprintf(stderr, "usage: layers_bench [FILTER [THREADS]]\n");
    return 2;
  }
  using cohort::Case;
  // Large products go to OpenBLAS, and the layers' loops split over the
  // compute threads: hold OpenBLAS to one thread, as the engine does, and
  // the compute threads to the count asked for.
  openblas_set_num_threads(1);
  cohort::SetComputeThreads(static_cast<int>(threads));
  const std::vector<Case> cases = {
      {"relu {}", {32, 16, 16}},
      {"gelu {}", {32, 16, 16}},
      {"gelu { tanh_approximation: true }", {32, 16, 16}},
      {"silu {}", {32, 16, 16}},
      {"tanh {}", {32, 16, 16}},
      {"sigmoid {}", {32, 16, 16}},
      {"leaky_relu {}", {32, 16, 16}},
      {"batchnorm2d {}", {32, 16, 16}},
      {"layernorm {}", {32, 16, 16}},
      {"groupnorm { groups: 8 }", {32, 16, 16}},
      {"layernorm {}", {512}},
      {"groupnorm { groups: 8 }", {512}},
      {"maxpool1d { kernel: 3 stride: 2 padding: 1 }", {32, 256}},
      {"avgpool1d { kernel: 3 stride: 2 padding: 1 }", {32, 256}},
      // D = 256, H = 4, L = 256, batch 8.
      {"attention { heads: 4 }", {256, 256}, 8},
      {"attention { heads: 4 bidirectional: true }", {256, 256}, 8},
      {"transformer_block { heads: 4 }", {256, 256}, 8},
      // DLRM on Criteo: 1 + 26 vectors of 16 features, batch 128.
      {"interaction { kind: DOT dim: 16 }", {27 * 16}, 128},
  };
  std::printf(
      "float32, %d thread(s); best of 5 x 10; wall ms, then this thread's "
      "CPU ms\n",
      static_cast<int>(threads));
  for (const Case& c : cases) {
    if (std::string(c.layer).find(only) == std::string::npos) continue;
    std::string shape;
    for (int64_t d : c.sample)
      shape += (shape.empty() ? "" : "x") + std::to_string(d);
    const cohort::Times t = cohort::Run(c, c.batch);
    std::printf("%-48s %-10s N=%-3lld %8.3f ms %8.3f cpu\n", c.layer,
                shape.c_str(), static_cast<long long>(c.batch), t.wall, t.cpu);
  }
  return 0;
}

// Milliseconds per forward + backward of issue 20's layers on the CPU
// engine, float32, one thread, next to relu and batchnorm2d on the same
// tensor (the yardsticks they replace in a recipe):
//   bazel build //bench:layers_bench && bazel-bin/bench/layers_bench
// bench/layers_torch.py prints PyTorch's times for the same cases.
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "google/protobuf/text_format.h"
#include "worker/layers/param_store.h"
#include "worker/zoo.h"

namespace cohort {
namespace {

struct Case {
  const char* layer;
  Shape sample;
};

double Run(const Case& c, int64_t n) {
  ModelSpec spec;
  google::protobuf::TextFormat::ParseFromString(c.layer, spec.add_layers());
  auto layers = BuildLayers<float>(spec);
  if (!layers.ok()) return -1;
  Layer<float>& layer = *(*layers)[0];
  if (!layer.Configure(c.sample).ok()) return -1;
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
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const int iters = 10;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      layer.Forward(x, &y, Mode::kTrain);
      layer.Backward(dy, &dx);
    }
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - t0)
                          .count() /
                      iters;
    if (ms < best) best = ms;
  }
  return best;
}

}  // namespace
}  // namespace cohort

int main() {
  using cohort::Case;
  const int64_t n = 64;
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
  };
  std::printf("batch %lld, float32, 1 thread; best of 5 x 10\n",
              static_cast<long long>(n));
  for (const Case& c : cases) {
    std::string shape;
    for (int64_t d : c.sample)
      shape += (shape.empty() ? "" : "x") + std::to_string(d);
    std::printf("%-48s %-10s %8.3f ms\n", c.layer, shape.c_str(),
                cohort::Run(c, n));
  }
  return 0;
}

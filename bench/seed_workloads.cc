// Training throughput of cohort's CPU engine on the seed workloads.
//   seed_workloads {lenet|conv1d|mlp|mobilenet|gpt} STEPS THREADS
// prints "NAME samples_per_s X" (the same line as torch_seed_workloads, the
// LibTorch yardstick; bench/compare_seed_workloads runs both side by side).
//   lenet:  lenet_cifar, batch 100, cross-entropy, SGD lr 0.001 momentum 0.9
//   conv1d: conv1d_bn on 3x10000, batch 4, MSE, SGD lr 0.001
//   mlp:    mlp_seed, batch 10, cross-entropy, SGD lr 0.01
//   mobilenet: examples/cifar10_mobilenet.textproto's model (depthwise-
//           separable blocks and inverted residuals), batch 32,
//           cross-entropy, SGD lr 0.01 momentum 0.9
//   gpt:    gpt_tiny (4 pre-norm blocks of 4 heads, width 256, context 256,
//           vocabulary 256, tied head), batch 8 windows, next-token
//           cross-entropy, AdamW lr 1e-3 weight decay 0.1 (samples/s x 256
//           is tokens/s)
// Fixed random inputs, 5 warm-up steps. The run checks itself: the loss on
// the fixed batch must be finite and lower at the end than at the start,
// or the program exits 1 instead of printing a number.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/malloc_tuning.h"
#include "google/protobuf/text_format.h"
#include "proto/job.pb.h"
#include "worker/compute_threads.h"
#include "worker/loss.h"
#include "worker/optim/optimizer.h"
#include "worker/zoo.h"

namespace cohort {
namespace {

// examples/cifar10_mobilenet.textproto's model block, without comments.
constexpr char kMobileNet[] =
    "  layers { conv2d { out_channels: 16 kernel: 3 padding: 1 no_bias: true } "
    "}\n"
    "  layers { batchnorm2d {} }\n"
    "  layers { relu {} }\n"
    "  layers { conv2d { out_channels: 16 kernel: 3 padding: 1 groups: 16 "
    "no_bias: true } }\n"
    "  layers { batchnorm2d {} }\n"
    "  layers { relu {} }\n"
    "  layers { conv2d { out_channels: 24 kernel: 1 no_bias: true } }\n"
    "  layers { batchnorm2d {} }\n"
    "  layers { relu {} }\n"
    "  layers { conv2d { out_channels: 24 kernel: 3 stride: 2 padding: 1 "
    "groups: 24 no_bias: true } }\n"
    "  layers { batchnorm2d {} }\n"
    "  layers { relu {} }\n"
    "  layers { conv2d { out_channels: 32 kernel: 1 no_bias: true } }\n"
    "  layers { batchnorm2d {} }\n"
    "  layers { relu {} }\n"
    "  layers { branch { combine: SUM\n"
    "    paths {\n"
    "      layers { conv2d { out_channels: 128 kernel: 1 no_bias: true } }\n"
    "      layers { batchnorm2d {} }\n"
    "      layers { relu {} }\n"
    "      layers { conv2d { out_channels: 128 kernel: 3 padding: 1 groups: "
    "128 no_bias: true } }\n"
    "      layers { batchnorm2d {} }\n"
    "      layers { relu {} }\n"
    "      layers { conv2d { out_channels: 32 kernel: 1 no_bias: true } }\n"
    "      layers { batchnorm2d {} }\n"
    "    }\n"
    "    paths {}\n"
    "  } }\n"
    "  layers { conv2d { out_channels: 32 kernel: 3 stride: 2 padding: 1 "
    "groups: 32 no_bias: true } }\n"
    "  layers { batchnorm2d {} }\n"
    "  layers { relu {} }\n"
    "  layers { conv2d { out_channels: 64 kernel: 1 no_bias: true } }\n"
    "  layers { batchnorm2d {} }\n"
    "  layers { relu {} }\n"
    "  layers { branch { combine: SUM\n"
    "    paths {\n"
    "      layers { conv2d { out_channels: 256 kernel: 1 no_bias: true } }\n"
    "      layers { batchnorm2d {} }\n"
    "      layers { relu {} }\n"
    "      layers { conv2d { out_channels: 256 kernel: 3 padding: 1 groups: "
    "256 no_bias: true } }\n"
    "      layers { batchnorm2d {} }\n"
    "      layers { relu {} }\n"
    "      layers { conv2d { out_channels: 64 kernel: 1 no_bias: true } }\n"
    "      layers { batchnorm2d {} }\n"
    "    }\n"
    "    paths {}\n"
    "  } }\n"
    "  layers { global_avgpool {} }\n"
    "  layers { linear { out_features: 10 } }\n";

struct Workload {
  const char* zoo;  // or empty: `layers` (ModelSpec text) on CIFAR samples
  int64_t batch;
  bool mse;
  double lr;
  double momentum;
  const char* layers = "";
  bool tokens = false;  // ids in, next-token loss, AdamW
};

bool Lookup(const std::string& name, Workload* w) {
  if (name == "lenet") {
    *w = {"lenet_cifar", 100, false, 0.001, 0.9};
  } else if (name == "conv1d") {
    *w = {"conv1d_bn", 4, true, 0.001, 0.0};
  } else if (name == "mlp") {
    *w = {"mlp_seed", 10, false, 0.01, 0.0};
  } else if (name == "mobilenet") {
    *w = {"", 32, false, 0.01, 0.9, kMobileNet};
  } else if (name == "gpt") {
    *w = {"gpt_tiny", 8, false, 0.001, 0.0, "", true};
  } else {
    return false;
  }
  return true;
}

// The engine's batch layout: {N, F} for vectors, {C, N, ...} otherwise.
Shape BatchShape(const Shape& sample, int64_t n) {
  if (sample.size() == 1) return {n, sample[0]};
  Shape s = {sample[0], n};
  s.insert(s.end(), sample.begin() + 1, sample.end());
  return s;
}

int Main(int argc, char** argv) {
  Workload w;
  if (argc != 4 || !Lookup(argv[1], &w)) {
    std::fprintf(stderr,
                 "usage: %s {lenet|conv1d|mlp|mobilenet|gpt} STEPS THREADS\n",
                 argv[0]);
    return 2;
  }
  const int steps = std::atoi(argv[2]);
  const int threads = std::atoi(argv[3]);
  if (steps <= 0 || threads <= 0) {
    std::fprintf(stderr, "STEPS and THREADS must be positive integers\n");
    return 2;
  }
  SetComputeThreads(threads);
  ModelSpec spec;
  Shape sample = {3, 32, 32};
  if (*w.zoo != 0) {
    spec.set_zoo(w.zoo);
    sample = *ZooInputShape(w.zoo);
  } else if (!google::protobuf::TextFormat::ParseFromString(w.layers, &spec)) {
    std::fprintf(stderr, "%s: the model text does not parse\n", argv[1]);
    return 1;
  }
  auto model_or = BuildModel<float>(spec, sample, 1);
  if (!model_or.ok()) {
    std::fprintf(stderr, "%s\n",
                 std::string(model_or.status().message()).c_str());
    return 1;
  }
  Model<float>& model = **model_or;
  OptimizerSpec opt_spec;
  opt_spec.set_kind(w.tokens ? OptimizerSpec::ADAMW : OptimizerSpec::SGD);
  opt_spec.set_lr(w.lr);
  opt_spec.set_momentum(w.momentum);
  if (w.tokens) {
    opt_spec.set_beta1(0.9f);
    opt_spec.set_beta2(0.999f);
    opt_spec.set_eps(1e-8f);
    opt_spec.set_weight_decay(0.1f);
  }
  auto opt = MakeOptimizer<float>(opt_spec, model.params().size());

  Rng rng(42);
  std::normal_distribution<float> normal;
  Tensor x(BatchShape(sample, w.batch));
  for (int64_t i = 0; i < x.size(); ++i) x[i] = normal(rng);
  // Token ids and their next-token targets.
  std::vector<float> ids(w.tokens ? x.size() : 0);
  for (int64_t i = 0; i < x.size() && w.tokens; ++i) {
    x[i] = static_cast<float>(rng() % 256);
    ids[i] = static_cast<float>(rng() % 256);
  }
  std::vector<int32_t> labels(w.batch);
  for (auto& l : labels) l = static_cast<int32_t>(rng() % 10);
  Tensor target(BatchShape(model.output_shape(), w.batch));
  for (int64_t i = 0; i < target.size(); ++i) target[i] = normal(rng);
  Tensor grad;

  auto step = [&]() {
    const Tensor& out = model.Forward(x, Mode::kTrain);
    const float loss = w.tokens ? SequenceCrossEntropy<float>(out, ids, &grad)
                       : w.mse  ? MeanSquaredError<float>(out, target, &grad)
                               : SoftmaxCrossEntropy<float>(out, labels, &grad);
    model.Backward(grad);
    opt->Step(model.params().span(), model.grads().span(), w.lr);
    return loss;
  };
  const float first = step();
  for (int i = 1; i < 5; ++i) step();
  const auto t0 = std::chrono::steady_clock::now();
  float last = 0;
  for (int i = 0; i < steps; ++i) last = step();
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  if (!std::isfinite(last) || !(last < first)) {
    std::fprintf(stderr, "%s: loss went from %g to %g; not reporting a rate\n",
                 argv[1], first, last);
    return 1;
  }
  std::printf("%s samples_per_s %.1f\n", argv[1], steps * w.batch / s);
  return 0;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  // As the cohort binary does (cli/cohort_main.cc).
  cohort::KeepLargeBuffersResident();
  return cohort::Main(argc, argv);
}

// The yardstick for //bench:seed_workloads: the same four workloads in
// LibTorch 1.13 (Debian's libtorch-dev, CPU), same command line, same output.
//   torch_seed_workloads {lenet|conv1d|mlp|mobilenet|gpt} STEPS THREADS
// prints "NAME samples_per_s X". Never linked into cohort itself.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

struct LeNet : torch::nn::Module {
  torch::nn::Conv2d c1{nullptr}, c2{nullptr};
  torch::nn::Linear f1{nullptr}, f2{nullptr}, f3{nullptr};
  LeNet() {
    c1 = register_module("c1", torch::nn::Conv2d(3, 6, 5));
    c2 = register_module("c2", torch::nn::Conv2d(6, 16, 5));
    f1 = register_module("f1", torch::nn::Linear(400, 120));
    f2 = register_module("f2", torch::nn::Linear(120, 84));
    f3 = register_module("f3", torch::nn::Linear(84, 10));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(c1(x)), 2);
    x = torch::max_pool2d(torch::relu(c2(x)), 2);
    x = x.flatten(1);
    return f3(torch::relu(f2(torch::relu(f1(x)))));
  }
};

struct Conv1dBn : torch::nn::Module {
  torch::nn::Conv1d c1{nullptr}, c2{nullptr}, c3{nullptr};
  torch::nn::BatchNorm1d b1{nullptr}, b2{nullptr};
  Conv1dBn() {
    using O = torch::nn::Conv1dOptions;
    c1 = register_module("c1", torch::nn::Conv1d(O(3, 16, 3).padding(1)));
    b1 = register_module("b1", torch::nn::BatchNorm1d(16));
    c2 = register_module("c2", torch::nn::Conv1d(O(16, 32, 3).padding(1)));
    b2 = register_module("b2", torch::nn::BatchNorm1d(32));
    c3 = register_module("c3", torch::nn::Conv1d(O(32, 3, 3).padding(1)));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(b1(c1(x)));
    x = torch::relu(b2(c2(x)));
    return c3(x);
  }
};

struct Mlp : torch::nn::Module {
  torch::nn::Linear f1{nullptr}, f2{nullptr};
  Mlp() {
    f1 = register_module("f1", torch::nn::Linear(100, 200));
    f2 = register_module("f2", torch::nn::Linear(200, 10));
  }
  torch::Tensor forward(torch::Tensor x) { return f2(torch::relu(f1(x))); }
};

// examples/cifar10_mobilenet.textproto's model: a 3x3 stem, depthwise-
// separable blocks and MobileNetV2 inverted residuals, as cohort runs it.
torch::nn::Sequential ConvBnRelu(int64_t in, int64_t out, int64_t k,
                                 int64_t stride, int64_t groups, bool relu) {
  torch::nn::Sequential s(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, k)
                                                .stride(stride)
                                                .padding(k / 2)
                                                .groups(groups)
                                                .bias(false)),
                          torch::nn::BatchNorm2d(out));
  if (relu) s->push_back(torch::nn::ReLU());
  return s;
}

struct InvertedResidual : torch::nn::Module {
  torch::nn::Sequential body{nullptr};
  InvertedResidual(int64_t c, int64_t expand) {
    const int64_t e = c * expand;
    torch::nn::Sequential b;
    b->extend(*ConvBnRelu(c, e, 1, 1, 1, true));
    b->extend(*ConvBnRelu(e, e, 3, 1, e, true));
    b->extend(*ConvBnRelu(e, c, 1, 1, 1, false));
    body = register_module("body", b);
  }
  torch::Tensor forward(torch::Tensor x) { return x + body->forward(x); }
};

struct MobileNet : torch::nn::Module {
  torch::nn::Sequential features{nullptr};
  torch::nn::Linear fc{nullptr};
  MobileNet() {
    torch::nn::Sequential f;
    f->extend(*ConvBnRelu(3, 16, 3, 1, 1, true));
    f->extend(*ConvBnRelu(16, 16, 3, 1, 16, true));
    f->extend(*ConvBnRelu(16, 24, 1, 1, 1, true));
    f->extend(*ConvBnRelu(24, 24, 3, 2, 24, true));
    f->extend(*ConvBnRelu(24, 32, 1, 1, 1, true));
    f->push_back(InvertedResidual(32, 4));
    f->extend(*ConvBnRelu(32, 32, 3, 2, 32, true));
    f->extend(*ConvBnRelu(32, 64, 1, 1, 1, true));
    f->push_back(InvertedResidual(64, 4));
    features = register_module("features", f);
    fc = register_module("fc", torch::nn::Linear(64, 10));
  }
  torch::Tensor forward(torch::Tensor x) {
    return fc(features->forward(x).mean({2, 3}));
  }
};

// gpt_tiny as cohort builds it (worker/zoo.h): token and learned position
// embeddings, 4 pre-norm blocks (nn::MultiheadAttention with a causal mask,
// MLP 4x with GELU), a final LayerNorm and the head tied to the token
// embedding. LibTorch 1.13's C++ attention takes [L, N, D].
struct Block : torch::nn::Module {
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::MultiheadAttention attn{nullptr};
  torch::nn::Linear fc{nullptr}, proj{nullptr};
  Block(int64_t d, int64_t heads) {
    ln1 = register_module(
        "ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    attn = register_module("attn", torch::nn::MultiheadAttention(d, heads));
    ln2 = register_module(
        "ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    fc = register_module("fc", torch::nn::Linear(d, 4 * d));
    proj = register_module("proj", torch::nn::Linear(4 * d, d));
  }
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& mask) {
    torch::Tensor h = ln1(x);
    x = x + std::get<0>(attn->forward(h, h, h, torch::Tensor(),
                                      /*need_weights=*/false, mask));
    return x + proj(torch::gelu(fc(ln2(x))));
  }
};

struct Gpt : torch::nn::Module {
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  std::vector<std::shared_ptr<Block>> blocks;
  torch::nn::LayerNorm ln{nullptr};
  torch::Tensor mask;
  Gpt(int64_t vocab, int64_t d, int64_t len, int64_t layers, int64_t heads) {
    wte = register_module("wte", torch::nn::Embedding(vocab, d));
    wpe = register_module("wpe", torch::nn::Embedding(len, d));
    for (int64_t i = 0; i < layers; ++i) {
      blocks.push_back(register_module("b" + std::to_string(i),
                                       std::make_shared<Block>(d, heads)));
    }
    ln = register_module(
        "ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    mask = torch::full({len, len}, -INFINITY).triu(1);
  }
  // ids [N, L] -> logits [L * N, V].
  torch::Tensor forward(torch::Tensor ids) {
    const int64_t len = ids.size(1);
    torch::Tensor x =
        (wte(ids) + wpe(torch::arange(len))).transpose(0, 1);  // [L, N, D]
    for (auto& b : blocks) x = b->forward(x, mask);
    x = ln(x);
    return torch::matmul(x, wte->weight.t()).reshape({-1, wte->weight.size(0)});
  }
};

// Samples per second of `steps` calls of `step` on batches of `batch`,
// after 5 warm-up steps.
template <typename Step>
double SamplesPerSecond(Step& step, int steps, int batch) {
  for (int i = 0; i < 5; ++i) step();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return steps * batch / s;
}

template <typename Net>
double Run(Net& net, torch::Tensor x, torch::Tensor y, bool mse, double lr,
           double momentum, int steps, int batch) {
  torch::optim::SGD opt(net.parameters(),
                        torch::optim::SGDOptions(lr).momentum(momentum));
  auto step = [&] {
    opt.zero_grad();
    torch::Tensor out = net.forward(x);
    torch::Tensor loss =
        mse ? torch::mse_loss(out, y) : torch::cross_entropy_loss(out, y);
    loss.backward();
    opt.step();
  };
  return SamplesPerSecond(step, steps, batch);
}

// Next-token training of `net` on a fixed batch of random ids, AdamW.
double RunGpt(Gpt& net, int steps, int batch, int len) {
  torch::optim::AdamW opt(net.parameters(),
                          torch::optim::AdamWOptions(1e-3).weight_decay(0.1));
  torch::Tensor ids = torch::randint(0, 256, {batch, len});
  torch::Tensor targets = torch::randint(0, 256, {len * batch});
  auto step = [&] {
    opt.zero_grad();
    torch::Tensor loss = torch::cross_entropy_loss(net.forward(ids), targets);
    loss.backward();
    opt.step();
  };
  return SamplesPerSecond(step, steps, batch);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr,
                 "usage: %s {lenet|conv1d|mlp|mobilenet|gpt} STEPS THREADS\n",
                 argv[0]);
    return 2;
  }
  const std::string name = argv[1];
  const int steps = std::atoi(argv[2]);
  const int threads = std::atoi(argv[3]);
  if (steps <= 0 || threads <= 0) {
    std::fprintf(stderr, "STEPS and THREADS must be positive integers\n");
    return 2;
  }
  torch::set_num_threads(threads);
  torch::manual_seed(1);
  double rate = 0;
  if (name == "lenet") {
    LeNet net;
    rate = Run(net, torch::randn({100, 3, 32, 32}),
               torch::randint(0, 10, {100}), false, 0.001, 0.9, steps, 100);
  } else if (name == "conv1d") {
    Conv1dBn net;
    rate = Run(net, torch::randn({4, 3, 10000}), torch::randn({4, 3, 10000}),
               true, 0.001, 0.0, steps, 4);
  } else if (name == "mlp") {
    Mlp net;
    rate = Run(net, torch::randn({10, 100}), torch::randint(0, 10, {10}), false,
               0.01, 0.0, steps, 10);
  } else if (name == "mobilenet") {
    MobileNet net;
    rate = Run(net, torch::randn({32, 3, 32, 32}), torch::randint(0, 10, {32}),
               false, 0.01, 0.9, steps, 32);
  } else if (name == "gpt") {
    Gpt net(256, 256, 256, 4, 4);
    rate = RunGpt(net, steps, 8, 256);
  } else {
    std::fprintf(
        stderr,
        "unknown workload \"%s\" (lenet, conv1d, mlp, mobilenet, gpt)\n",
        name.c_str());
    return 2;
  }
  std::printf("%s samples_per_s %.1f\n", name.c_str(), rate);
  return 0;
}

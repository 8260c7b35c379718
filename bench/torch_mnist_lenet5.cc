// LibTorch yardstick for one epoch of LeNet-5 on MNIST (batch 64, SGD lr
// 0.01 momentum 0.9, lr x0.1 from step 750), the work of
// examples/mnist_lenet5.textproto.
//   torch_mnist_lenet5 MNIST_DIR THREADS
// MNIST_DIR holds the four IDX files uncompressed (LibTorch's reader does not
// read .gz). Prints wall seconds (loading included) and test accuracy.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

struct LeNet5 : torch::nn::Module {
  torch::nn::Conv2d c1{nullptr}, c2{nullptr};
  torch::nn::Linear f1{nullptr}, f2{nullptr}, f3{nullptr};
  LeNet5() {
    c1 = register_module(
        "c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 6, 5).padding(2)));
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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MNIST_DIR THREADS\n", argv[0]);
    return 2;
  }
  torch::set_num_threads(std::atoi(argv[2]));
  torch::manual_seed(1);
  const auto t0 = std::chrono::steady_clock::now();
  auto norm = torch::data::transforms::Normalize<>(0.1307, 0.3081);
  auto train = torch::data::datasets::MNIST(argv[1]).map(norm).map(
      torch::data::transforms::Stack<>());
  auto loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
          std::move(train), torch::data::DataLoaderOptions().batch_size(64));
  LeNet5 net;
  torch::optim::SGD opt(net.parameters(),
                        torch::optim::SGDOptions(0.01).momentum(0.9));
  int64_t step = 0;
  for (auto& batch : *loader) {
    if (step++ == 750) {
      static_cast<torch::optim::SGDOptions&>(opt.param_groups()[0].options())
          .lr(0.001);
    }
    opt.zero_grad();
    auto loss =
        torch::cross_entropy_loss(net.forward(batch.data), batch.target);
    loss.backward();
    opt.step();
  }
  auto test = torch::data::datasets::MNIST(
                  argv[1], torch::data::datasets::MNIST::Mode::kTest)
                  .map(norm)
                  .map(torch::data::transforms::Stack<>());
  auto test_loader = torch::data::make_data_loader(
      std::move(test), torch::data::DataLoaderOptions().batch_size(1000));
  torch::NoGradGuard no_grad;
  int64_t correct = 0, total = 0;
  for (auto& batch : *test_loader) {
    auto pred = net.forward(batch.data).argmax(1);
    correct += pred.eq(batch.target).sum().item<int64_t>();
    total += batch.target.size(0);
  }
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  std::printf("torch_mnist_lenet5 wall_seconds %.2f test_accuracy %.4f\n", s,
              static_cast<double>(correct) / total);
  return 0;
}

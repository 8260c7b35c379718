// One layer's forward and backward in double precision on numbers read from
// stdin, for tests/layers_torch_test (which compares them with PyTorch's).
//
//   layer_dump 'LAYER' N D1 [D2 [D3]] < numbers
//
// LAYER is one LayerSpec in text format ("groupnorm { groups: 2 }"), built
// as the model builds it (worker/zoo.h); N the batch and D1.. the
// per-sample shape. stdin holds, whitespace-separated: the input and the
// upstream gradient in the CPU engine's layout (layer.h: {N, F} or batch-
// inner {C, N, ...}), then every parameter in Params() order (PyTorch's
// layout). Prints the output, the input gradient and each parameter
// gradient, one number a line (%.17g). Bad arguments: a line, exit 2.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "google/protobuf/text_format.h"
#include "worker/layers/param_store.h"
#include "worker/zoo.h"

namespace cohort {
namespace {

int Fail(const std::string& why) {
  std::fprintf(stderr, "layer_dump: %s\n", why.c_str());
  return 2;
}

bool Read(BasicTensor<double>& t, int64_t offset, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::scanf("%lf", &t[offset + i]) != 1) return false;
  }
  return true;
}

void Print(const double* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) std::printf("%.17g\n", v[i]);
}

int Run(int argc, char** argv) {
  if (argc < 4 || argc > 6) {
    return Fail("usage: layer_dump 'LAYER' N D1 [D2 [D3]] < numbers");
  }
  ModelSpec spec;
  if (!google::protobuf::TextFormat::ParseFromString(argv[1],
                                                     spec.add_layers())) {
    return Fail(std::string("cannot parse the layer ") + argv[1]);
  }
  const int64_t n = std::atoll(argv[2]);
  Shape sample;
  for (int i = 3; i < argc; ++i) sample.push_back(std::atoll(argv[i]));
  auto layers = BuildLayers<double>(spec);
  if (!layers.ok()) return Fail(std::string(layers.status().message()));
  Layer<double>& layer = *(*layers)[0];
  absl::StatusOr<Shape> out_shape = layer.Configure(sample);
  if (!out_shape.ok()) return Fail(std::string(out_shape.status().message()));
  ParamStore<double> store;
  Layer<double>* list[] = {&layer};
  store.Build(list);
  // Batch shapes in the engine's layout.
  auto batched = [n](const Shape& s) {
    if (s.size() == 1) return Shape{n, s[0]};
    Shape b = {s[0], n};
    b.insert(b.end(), s.begin() + 1, s.end());
    return b;
  };
  BasicTensor<double> x(batched(sample)), dy(batched(*out_shape));
  if (!Read(x, 0, x.size()) || !Read(dy, 0, dy.size())) {
    return Fail("stdin ends before the input and the upstream gradient");
  }
  for (const auto& e : store.entries()) {
    if (!Read(store.values(), e.offset, NumElements(e.shape))) {
      return Fail("stdin ends before parameter " + e.name);
    }
  }
  BasicTensor<double> y, dx;
  layer.Forward(x, &y, Mode::kTrain);
  layer.Backward(dy, &dx);
  Print(y.data(), y.size());
  Print(dx.data(), dx.size());
  for (const auto& e : store.entries()) {
    Print(store.grads().data() + e.offset, NumElements(e.shape));
  }
  return 0;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) { return cohort::Run(argc, argv); }

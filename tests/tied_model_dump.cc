// A whole model of the CPU engine (so that weight tying is in play) in
// double precision on numbers from stdin, for tests/embedding_torch_test.
//
//   tied_model_dump 'MODEL_SPEC_TEXT' N D1 [D2] < numbers
//
// MODEL_SPEC_TEXT is a ModelSpec ("layers { embedding {...} } layers
// {...}"), built as the zoo builds it (worker/zoo.h) with Model::Create,
// which ties tied_lm_head to the embedding. N is the batch and D1.. the
// per-sample input shape. stdin holds, whitespace-separated: the input and
// the upstream gradient in the CPU engine's layout (layer.h), then every
// parameter of the model in order (PyTorch's layout). Prints the output,
// then each parameter's gradient, one number a line (%.17g). Bad
// arguments: a line, exit 2.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "google/protobuf/text_format.h"
#include "proto/job.pb.h"
#include "worker/model.h"
#include "worker/zoo.h"

namespace cohort {
namespace {

int Fail(const std::string& why) {
  std::fprintf(stderr, "tied_model_dump: %s\n", why.c_str());
  return 2;
}

bool Read(double* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::scanf("%lf", &v[i]) != 1) return false;
  }
  return true;
}

void Print(const double* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) std::printf("%.17g\n", v[i]);
}

int Run(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    return Fail("usage: tied_model_dump 'MODEL_SPEC' N D1 [D2] < numbers");
  }
  ModelSpec spec;
  if (!google::protobuf::TextFormat::ParseFromString(argv[1], &spec)) {
    return Fail(std::string("cannot parse the model ") + argv[1]);
  }
  const int64_t n = std::atoll(argv[2]);
  Shape sample;
  for (int i = 3; i < argc; ++i) sample.push_back(std::atoll(argv[i]));
  auto layers = BuildLayers<double>(spec);
  if (!layers.ok()) return Fail(std::string(layers.status().message()));
  auto model = Model<double>::Create(*std::move(layers), sample);
  if (!model.ok()) return Fail(std::string(model.status().message()));
  Model<double>& m = **model;
  auto batched = [n](const Shape& s) {
    if (s.size() == 1) return Shape{n, s[0]};
    Shape b = {s[0], n};
    b.insert(b.end(), s.begin() + 1, s.end());
    return b;
  };
  TensorD x(batched(sample)), dy(batched(m.output_shape()));
  if (!Read(x.data(), x.size()) || !Read(dy.data(), dy.size())) {
    return Fail("stdin ends before the input and the upstream gradient");
  }
  for (const auto& e : m.param_store().entries()) {
    if (!Read(m.params().data() + e.offset, NumElements(e.shape))) {
      return Fail("stdin ends before parameter " + e.name);
    }
  }
  const TensorD& y = m.Forward(x, Mode::kTrain);
  Print(y.data(), y.size());
  m.Backward(dy);
  for (const auto& e : m.param_store().entries()) {
    Print(m.grads().data() + e.offset, NumElements(e.shape));
  }
  return 0;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) { return cohort::Run(argc, argv); }

// Runs one layer of the CPU engine in double precision on numbers from
// stdin and prints its output and gradients, for
// tests/conv_branch_torch_test (which computes the same in PyTorch).
//
//   conv_branch_dump 'LAYER_SPEC_TEXT' C,H,W N < numbers
//
// Prints the layer's parameter names and element counts (one "name count"
// line each, in Params() order) and a line "end". Then reads, whitespace
// separated: every parameter's values (that order, PyTorch's layout), the
// input x in PyTorch's layout (N first) and dLoss/dOut likewise; runs
// Forward (training mode) and Backward and prints y, dLoss/dx and every
// parameter gradient, each as one line of numbers in PyTorch's layout.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/text_format.h"
#include "proto/job.pb.h"
#include "worker/layers/param_store.h"
#include "worker/zoo.h"

namespace cohort {
namespace {

// Index of element (n, c, rest) of a torch tensor [N][C][R] in the engine's
// batch-inner [C][N][R] (dense [N][F] is the same in both).
int64_t Inner(const Shape& sample, int64_t batch, int64_t torch_index) {
  if (sample.size() == 1) return torch_index;
  int64_t rest = 1;
  for (size_t d = 1; d < sample.size(); ++d) rest *= sample[d];
  const int64_t per_sample = sample[0] * rest;
  const int64_t n = torch_index / per_sample;
  const int64_t c = torch_index % per_sample / rest;
  const int64_t r = torch_index % rest;
  return (c * batch + n) * rest + r;
}

Shape Batched(const Shape& s, int64_t n) {
  if (s.size() == 1) return {n, s[0]};
  Shape b = {s[0], n};
  b.insert(b.end(), s.begin() + 1, s.end());
  return b;
}

bool ReadInto(double* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::scanf("%lf", &v[i]) != 1) return false;
  }
  return true;
}

void Print(const double* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) std::printf("%.17g ", v[i]);
  std::printf("\n");
}

// Reads a batch tensor given in torch's layout into the engine's.
bool ReadBatch(const Shape& sample, int64_t batch, TensorD* t) {
  t->Resize(Batched(sample, batch));
  std::vector<double> v(t->size());
  if (!ReadInto(v.data(), t->size())) return false;
  for (int64_t i = 0; i < t->size(); ++i) (*t)[Inner(sample, batch, i)] = v[i];
  return true;
}

void PrintBatch(const Shape& sample, int64_t batch, const TensorD& t) {
  std::vector<double> v(t.size());
  for (int64_t i = 0; i < t.size(); ++i) v[i] = t[Inner(sample, batch, i)];
  Print(v.data(), t.size());
}

int Main(int argc, char** argv) {
  ModelSpec spec;
  Shape sample;
  int64_t batch = 0;
  if (argc != 4 ||
      !google::protobuf::TextFormat::ParseFromString(argv[1],
                                                     spec.add_layers()) ||
      !absl::SimpleAtoi(argv[3], &batch)) {
    std::fprintf(stderr, "usage: %s 'LAYER_SPEC' C,H,W N < numbers\n", argv[0]);
    return 2;
  }
  for (absl::string_view d : absl::StrSplit(argv[2], ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(d, &v)) return 2;
    sample.push_back(v);
  }
  absl::StatusOr<Model<double>::LayerList> layers = BuildLayers<double>(spec);
  if (!layers.ok()) {
    std::fprintf(stderr, "%s\n",
                 std::string(layers.status().message()).c_str());
    return 1;
  }
  Layer<double>& layer = *(*layers)[0];
  absl::StatusOr<Shape> out_shape = layer.Configure(sample);
  if (!out_shape.ok()) {
    std::fprintf(stderr, "%s\n",
                 std::string(out_shape.status().message()).c_str());
    return 1;
  }
  ParamStore<double> store;
  Layer<double>* list[] = {&layer};
  store.Build(list);
  for (const auto& e : store.entries()) {
    // Entry names are "0.NAME" (layer index 0).
    std::printf("%s %lld\n", e.name.substr(2).c_str(),
                static_cast<long long>(NumElements(e.shape)));
  }
  std::printf("end\n");
  std::fflush(stdout);
  for (const auto& e : store.entries()) {
    if (!ReadInto(store.values().data() + e.offset, NumElements(e.shape))) {
      return 1;
    }
  }
  TensorD x, dy, y, dx;
  if (!ReadBatch(sample, batch, &x) || !ReadBatch(*out_shape, batch, &dy)) {
    std::fprintf(stderr, "too few numbers on stdin\n");
    return 1;
  }
  layer.Forward(x, &y, Mode::kTrain);
  layer.Backward(dy, &dx);
  PrintBatch(*out_shape, batch, y);
  PrintBatch(sample, batch, dx);
  for (const auto& e : store.entries()) {
    Print(store.grads().data() + e.offset, NumElements(e.shape));
  }
  return 0;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) { return cohort::Main(argc, argv); }

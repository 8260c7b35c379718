// Steps a few parameter tensors with the optimizer a spec describes, as the
// CPU engine does (kernels/update_rules.h through MakeOptimizer, the buffer
// cut into SLICES slices on kNormBlock multiples, LAMB and LARS in two
// passes), and prints the parameters after every step, one per line, for
// tests/optim_torch_test.sh.
//
//   optim_dump float|double 'OPTIMIZER SPEC (text)' SLICES < input
//
// input: the tensor count T, then T pairs (elements, excluded from decay:
// 0 or 1), the initial parameters of every tensor, the step count S and S
// steps' gradients, all whitespace-separated. The spec is used as given: it
// must name every hyper-parameter (no defaults are filled).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/text_format.h"
#include "kernels/update_rules.h"
#include "proto/job.pb.h"
#include "worker/optim/optimizer.h"

namespace cohort {
namespace {

template <typename T>
int Run(const OptimizerSpec& spec, int slices) {
  int tensors = 0;
  if (std::scanf("%d", &tensors) != 1 || tensors < 1) return 2;
  std::vector<int64_t> sizes;
  std::vector<bool> no_decay;
  for (int t = 0; t < tensors; ++t) {
    long long size = 0;
    int excluded = 0;
    if (std::scanf("%lld %d", &size, &excluded) != 2) return 2;
    sizes.push_back(size);
    no_decay.push_back(excluded != 0);
  }
  const std::vector<ParamTensor> layout = ParamTensorsOf(sizes, no_decay);
  const int64_t n = layout.back().end;
  auto read = [](std::vector<T>& v) {
    for (T& x : v) {
      double d;
      if (std::scanf("%lf", &d) != 1) return false;
      x = static_cast<T>(d);
    }
    return true;
  };
  std::vector<T> p(n), g(n);
  int steps = 0;
  if (!read(p) || std::scanf("%d", &steps) != 1) return 2;
  std::vector<int64_t> cuts;
  for (int r = 0; r <= slices; ++r) {
    cuts.push_back(r == slices ? n
                               : (n * r / slices) / kNormBlock * kNormBlock);
  }
  std::vector<std::unique_ptr<UpdateRule<T>>> rules;
  for (int r = 0; r < slices; ++r) {
    rules.push_back(
        MakeOptimizer<T>(spec, cuts[r + 1] - cuts[r],
                         MakeRuleLayout(layout, cuts[r], cuts[r + 1])));
  }
  const RuleLayout whole = MakeRuleLayout(layout, 0, n);
  const int k = rules[0]->SumsPerPiece();
  std::vector<double> sums(whole.num_pieces * k), totals(whole.num_tensors * k);
  for (int step = 0; step < steps; ++step) {
    if (!read(g)) return 2;
    auto ps = [&](int r) {
      return absl::MakeSpan(p.data() + cuts[r], cuts[r + 1] - cuts[r]);
    };
    auto gs = [&](int r) {
      return absl::MakeConstSpan(g.data() + cuts[r], cuts[r + 1] - cuts[r]);
    };
    if (k == 0) {
      for (int r = 0; r < slices; ++r) rules[r]->Step(ps(r), gs(r), spec.lr());
    } else {
      for (int r = 0; r < slices; ++r) {
        rules[r]->BeginStep(ps(r), gs(r), sums.data());
      }
      FoldPieceSums(whole, k, sums.data(), totals.data());
      for (int r = 0; r < slices; ++r) {
        rules[r]->FinishStep(ps(r), gs(r), spec.lr(), totals.data());
      }
    }
    for (T v : p) std::printf("%.17g\n", static_cast<double>(v));
  }
  return 0;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  cohort::OptimizerSpec spec;
  if (argc != 4 ||
      (std::strcmp(argv[1], "float") != 0 &&
       std::strcmp(argv[1], "double") != 0) ||
      !google::protobuf::TextFormat::ParseFromString(argv[2], &spec)) {
    std::fprintf(stderr,
                 "usage: %s float|double 'OPTIMIZER SPEC' SLICES < input\n",
                 argv[0]);
    return 2;
  }
  const int slices = std::max(1, std::atoi(argv[3]));
  const int rc = std::strcmp(argv[1], "float") == 0
                     ? cohort::Run<float>(spec, slices)
                     : cohort::Run<double>(spec, slices);
  if (rc != 0) std::fprintf(stderr, "%s: malformed input\n", argv[0]);
  return rc;
}

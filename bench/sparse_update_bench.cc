// Rows per second of the row-wise embedding rules' Step (kernels/
// sparse_update_rules.h): Adagrad and SparseAdam, 4096 distinct random rows
// of a 1M-row table per step, at dim 16 and 64, on the compute threads
// (OMP_NUM_THREADS).
//
//   bazel build //bench:sparse_update_bench
//   bazel-bin/bench/sparse_update_bench [STEPS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/sparse_update_rules.h"

namespace cohort {
namespace {

constexpr int64_t kTableRows = 1 << 20;
constexpr int64_t kTouched = 4096;

// Rows/s of `steps` steps of `kind` at `dim`, each on fresh random rows.
double RowsPerSecond(RuleKind kind, int64_t dim, int steps) {
  RuleOptions options;
  options.kind = kind;
  auto rule = MakeSparseUpdateRule(options, kTableRows, dim);
  if (!rule.ok()) {
    std::fprintf(stderr, "%s\n", rule.status().ToString().c_str());
    std::exit(1);
  }
  std::vector<float> table(kTableRows * dim, 0.5f);
  std::vector<float> grads(kTouched * dim, 0.25f);
  std::mt19937_64 gen(1);
  std::uniform_int_distribution<int64_t> id(0, kTableRows - 1);
  std::vector<std::vector<int64_t>> row_sets(64);  // far beyond caches
  for (auto& rows : row_sets) {
    while (static_cast<int64_t>(rows.size()) < kTouched) {
      rows.push_back(id(gen));
      if (rows.size() == kTouched) {
        std::sort(rows.begin(), rows.end());
        rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
      }
    }
  }
  double seconds = 0;
  for (int s = 0; s < steps; ++s) {
    const auto& rows = row_sets[s % row_sets.size()];
    const auto t0 = std::chrono::steady_clock::now();
    const absl::Status st =
        (*rule)->Step(table.data(), dim, rows, grads.data(), 0.01);
    seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (!st.ok()) std::exit(1);
  }
  return static_cast<double>(steps) * kTouched / seconds;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 500;
  struct Case {
    const char* name;
    cohort::RuleKind kind;
  };
  const Case cases[] = {{"adagrad", cohort::RuleKind::kAdagrad},
                        {"sparse_adam", cohort::RuleKind::kAdam}};
  for (const Case& c : cases) {
    for (int64_t dim : {16, 64}) {
      std::printf(
          "%-12s dim %3lld: %.3g rows/s (%d steps of %lld rows of a "
          "%lld-row table)\n",
          c.name, static_cast<long long>(dim),
          cohort::RowsPerSecond(c.kind, dim, steps), steps,
          static_cast<long long>(cohort::kTouched),
          static_cast<long long>(cohort::kTableRows));
    }
  }
  return 0;
}

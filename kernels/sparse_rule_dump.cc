// Steps an embedding table with a row-wise rule (kernels/
// sparse_update_rules.h), merging each step's repeated ids with MergeRows
// first, and prints the table after every step, one float per line, for
// tests/sparse_optim_torch_test.sh.
//
//   sparse_rule_dump sgd|adagrad|adam lr=LR [NAME=VALUE ...] < input
//
// NAME: lr_decay, initial_accumulator_value, eps (Adagrad); beta1, beta2,
// eps (SparseAdam); an option not given keeps common/update_options.h's
// default. input: ROWS DIM, the table's ROWS x DIM floats, the step count
// S, then per step the id count N, N ids (repeats allowed) and N x DIM
// gradients (one row per id), all whitespace-separated.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/sparse_update_rules.h"

namespace cohort {
namespace {

// NAME=VALUE arguments; false on a malformed one.
bool ParseValues(int argc, char** argv, std::map<std::string, double>* out) {
  for (int i = 2; i < argc; ++i) {
    const char* eq = std::strchr(argv[i], '=');
    if (eq == nullptr) return false;
    char* end = nullptr;
    const double v = std::strtod(eq + 1, &end);
    if (end == eq + 1 || *end != '\0') return false;
    (*out)[std::string(argv[i], eq - argv[i])] = v;
  }
  return true;
}

// The options `kind` and `values` say; false on an unknown kind or name.
bool MakeOptions(const std::string& kind,
                 const std::map<std::string, double>& values, RuleOptions* o) {
  for (const auto& [name, v] : values) {
    if (name == "lr") continue;
    if (kind == "adagrad" && name == "lr_decay") {
      o->adagrad.lr_decay = v;
    } else if (kind == "adagrad" && name == "initial_accumulator_value") {
      o->adagrad.initial_accumulator_value = v;
    } else if (kind == "adagrad" && name == "eps") {
      o->adagrad.eps = v;
    } else if (kind == "adam" && name == "beta1") {
      o->adam.beta1 = v;
    } else if (kind == "adam" && name == "beta2") {
      o->adam.beta2 = v;
    } else if (kind == "adam" && name == "eps") {
      o->adam.eps = v;
    } else {
      std::fprintf(stderr, "unknown option %s for %s\n", name.c_str(),
                   kind.c_str());
      return false;
    }
  }
  if (kind == "sgd") o->kind = RuleKind::kSgd;
  if (kind == "adagrad") o->kind = RuleKind::kAdagrad;
  if (kind == "adam") o->kind = RuleKind::kAdam;
  return kind == "sgd" || kind == "adagrad" || kind == "adam";
}

bool ReadFloats(std::vector<float>* v) {
  for (float& x : *v) {
    if (std::scanf("%f", &x) != 1) return false;
  }
  return true;
}

// 0, 1 on a refused rule or bad rows, 2 on malformed input.
int Run(const RuleOptions& options, double lr) {
  long long rows = 0, dim = 0;
  int steps = 0;
  if (std::scanf("%lld %lld", &rows, &dim) != 2) return 2;
  auto rule = MakeSparseUpdateRule(options, rows, dim);
  if (!rule.ok()) {
    std::fprintf(stderr, "%s\n", rule.status().ToString().c_str());
    return 1;
  }
  std::vector<float> table(rows * dim);
  if (!ReadFloats(&table) || std::scanf("%d", &steps) != 1) return 2;
  std::vector<int64_t> merged;
  std::vector<float> summed;
  for (int s = 0; s < steps; ++s) {
    long long n = 0;
    if (std::scanf("%lld", &n) != 1 || n < 0) return 2;
    std::vector<int64_t> ids(n);
    for (int64_t& id : ids) {
      long long v;
      if (std::scanf("%lld", &v) != 1) return 2;
      id = v;
    }
    std::vector<float> grads(n * dim);
    if (!ReadFloats(&grads)) return 2;
    MergeRows(ids, grads.data(), dim, &merged, &summed);
    const absl::Status st =
        (*rule)->Step(table.data(), dim, merged, summed.data(), lr);
    if (!st.ok()) {
      std::fprintf(stderr, "step %d: %s\n", s, st.ToString().c_str());
      return 1;
    }
    for (float v : table) std::printf("%.9g\n", static_cast<double>(v));
  }
  return 0;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  std::map<std::string, double> values;
  cohort::RuleOptions options;
  if (argc < 3 || !cohort::ParseValues(argc, argv, &values) ||
      values.count("lr") == 0 ||
      !cohort::MakeOptions(argv[1], values, &options)) {
    std::fprintf(stderr,
                 "usage: %s sgd|adagrad|adam lr=LR [NAME=VALUE ...] < input\n",
                 argv[0]);
    return 2;
  }
  const int rc = cohort::Run(options, values["lr"]);
  if (rc == 2) std::fprintf(stderr, "%s: malformed input\n", argv[0]);
  return rc;
}

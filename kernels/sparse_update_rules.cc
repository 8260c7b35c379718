#include "kernels/sparse_update_rules.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/parallel.h"

namespace cohort {

SparseUpdateRule::SparseUpdateRule(int64_t num_rows, int64_t dim,
                                   int state_per_row, float state_init)
    : num_rows_(num_rows),
      dim_(dim),
      state_stride_(state_per_row),
      state_init_(state_init),
      state_(num_rows * state_per_row, state_init) {}

absl::Span<float> SparseUpdateRule::State(int64_t row) {
  CHECK(row >= 0 && row < num_rows_) << "row " << row << " of " << num_rows_;
  return absl::MakeSpan(state_.data() + row * state_stride_, state_stride_);
}

absl::Status SparseUpdateRule::Step(float* table, int64_t dim,
                                    absl::Span<const int64_t> rows,
                                    const float* grads, double lr) {
  CHECK_EQ(dim, dim_) << "the rule was made for rows of " << dim_;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= num_rows_) {
      return absl::InvalidArgumentError(
          absl::StrCat("sparse update: row id ", rows[i], " at position ", i,
                       " is outside the table's ", num_rows_, " rows"));
    }
    if (i > 0 && rows[i] <= rows[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sparse update: row ids must be unique and ascending (MergeRows), "
          "but ",
          rows[i], " at position ", i, " follows ", rows[i - 1]));
    }
  }
  // A dense table's row r is slot r of the table and of the state.
  StepSlots(table, state_.data(), rows, grads, lr);
  return absl::OkStatus();
}

void SparseUpdateRule::StepSlots(float* values, float* state,
                                 absl::Span<const int64_t> slots,
                                 const float* grads, double lr) {
  ++steps_;
  // A touched row is a few dozen floats: split the rows so that a range
  // still holds about kElementwiseGrain elements.
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / dim_);
  ParallelRanges(static_cast<int64_t>(slots.size()), grain,
                 [&](int64_t begin, int64_t end) {
                   StepRows(values, state, slots, grads, lr, begin, end);
                 });
}

void SparseUpdateRule::InitRowState(float* state) const {
  std::fill(state, state + state_stride_, state_init_);
}

namespace {

// torch.optim.SGD on a sparse gradient: p.add_(g, alpha=-lr).
class SparseSgd : public SparseUpdateRule {
 public:
  SparseSgd(int64_t num_rows, int64_t dim)
      : SparseUpdateRule(num_rows, dim, 0, 0.0f) {}
  int state_per_row() const override { return 0; }

 protected:
  void StepRows(float* values, float* /*state*/,
                absl::Span<const int64_t> slots, const float* grads, double lr,
                int64_t begin, int64_t end) override {
    const float rate = static_cast<float>(lr);
    const int64_t d = dim();
    for (int64_t k = begin; k < end; ++k) {
      float* p = values + slots[k] * d;
      const float* g = grads + k * d;
      for (int64_t i = 0; i < d; ++i) p[i] -= rate * g[i];
    }
  }
};

// One row of Adagrad. The same expression as the dense rule's kernel
// (kernels/update_rules.cc, AdagradKernel with weight decay 0), compiled
// with the same flags, so that both round (and fuse) alike.
void AdagradRow(float* p, const float* g, float* sum, int64_t n, float clr,
                float eps) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    sum[i] += gi * gi;
    p[i] -= clr * (gi / (std::sqrt(sum[i]) + eps));
  }
}

class SparseAdagrad : public SparseUpdateRule {
 public:
  SparseAdagrad(const AdagradOptions& options, int64_t num_rows, int64_t dim)
      : SparseUpdateRule(num_rows, dim, static_cast<int>(dim),
                         static_cast<float>(options.initial_accumulator_value)),
        options_(options) {}
  int state_per_row() const override { return static_cast<int>(dim()); }

 protected:
  void StepRows(float* values, float* state, absl::Span<const int64_t> slots,
                const float* grads, double lr, int64_t begin,
                int64_t end) override {
    // In double, as PyTorch computes it in Python, then rounded once (as
    // the dense rule does).
    const float clr = static_cast<float>(
        lr / (1 + (static_cast<double>(steps()) - 1) * options_.lr_decay));
    const float eps = static_cast<float>(options_.eps);
    const int64_t d = dim();
    for (int64_t k = begin; k < end; ++k) {
      AdagradRow(values + slots[k] * d, grads + k * d, state + slots[k] * d, d,
                 clr, eps);
    }
  }

 private:
  AdagradOptions options_;
};

// torch.optim.SparseAdam's scalars of one step, rounded to float where
// PyTorch's tensor arithmetic rounds them.
struct SparseAdamScalars {
  float one_minus_beta1;
  float one_minus_beta2;
  float eps;
  float neg_step_size;  // -lr * sqrt(1 - b2^t) / (1 - b1^t), from double
};

// One row of SparseAdam, in torch 1.13's order of operations
// (torch/optim/_functional.py, sparse_adam): the moments move by their
// update values, and the numerator and denominator are old + update.
void SparseAdamRow(float* p, const float* g, float* m, float* v, int64_t n,
                   const SparseAdamScalars& s) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float m_old = m[i], v_old = v[i];
    const float m_up = (gi - m_old) * s.one_minus_beta1;
    const float v_up = (gi * gi - v_old) * s.one_minus_beta2;
    m[i] = m_old + m_up;
    v[i] = v_old + v_up;
    const float denom = std::sqrt(v[i]) + s.eps;
    p[i] += s.neg_step_size * (m[i] / denom);
  }
}

class SparseAdam : public SparseUpdateRule {
 public:
  SparseAdam(const AdamOptions& options, int64_t num_rows, int64_t dim)
      : SparseUpdateRule(num_rows, dim, static_cast<int>(2 * dim), 0.0f),
        options_(options) {}
  int state_per_row() const override { return static_cast<int>(2 * dim()); }

 protected:
  void StepRows(float* values, float* state, absl::Span<const int64_t> slots,
                const float* grads, double lr, int64_t begin,
                int64_t end) override {
    const double t = static_cast<double>(steps());
    const double bc1 = 1 - std::pow(options_.beta1, t);
    const double bc2 = 1 - std::pow(options_.beta2, t);
    SparseAdamScalars s;
    s.one_minus_beta1 = static_cast<float>(1 - options_.beta1);
    s.one_minus_beta2 = static_cast<float>(1 - options_.beta2);
    s.eps = static_cast<float>(options_.eps);
    s.neg_step_size = static_cast<float>(-(lr * std::sqrt(bc2) / bc1));
    const int64_t d = dim();
    for (int64_t k = begin; k < end; ++k) {
      float* m = state + slots[k] * 2 * d;
      SparseAdamRow(values + slots[k] * d, grads + k * d, m, m + d, d, s);
    }
  }

 private:
  AdamOptions options_;
};

absl::Status Refuse(absl::string_view option, absl::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat(
      "optimizer option '", option, "' is not supported by ", rule,
      " on sparse (row-wise) embedding gradients; PyTorch refuses it there "
      "too"));
}

// The first option of `options` that the sparse rules cannot honour.
absl::Status CheckSparseOptions(const RuleOptions& options) {
  switch (options.kind) {
    case RuleKind::kSgd:
      if (options.sgd.momentum != 0) return Refuse("momentum", "SGD");
      if (options.sgd.nesterov) return Refuse("nesterov", "SGD");
      if (options.sgd.weight_decay != 0) return Refuse("weight_decay", "SGD");
      return absl::OkStatus();
    case RuleKind::kAdagrad:
      if (options.adagrad.weight_decay != 0) {
        return Refuse("weight_decay", "Adagrad");
      }
      return absl::OkStatus();
    case RuleKind::kAdam:
      if (options.adam.decoupled) return Refuse("AdamW", "SparseAdam");
      if (options.adam.weight_decay != 0) {
        return Refuse("weight_decay", "SparseAdam");
      }
      return absl::OkStatus();
    case RuleKind::kRmsprop:
      return Refuse("RMSprop", "the sparse update rules");
    case RuleKind::kLamb:
      return Refuse("LAMB", "the sparse update rules");
    case RuleKind::kLars:
      return Refuse("LARS", "the sparse update rules");
  }
  return absl::InvalidArgumentError("unknown optimizer kind");
}

}  // namespace

absl::StatusOr<std::unique_ptr<SparseUpdateRule>> MakeSparseUpdateRule(
    const RuleOptions& options, int64_t rows, int64_t dim) {
  if (rows < 0 || dim < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparse update rule: a table of ", rows, " rows of ", dim,
                     " floats (rows must be >= 0 and dim >= 1)"));
  }
  const absl::Status ok = CheckSparseOptions(options);
  if (!ok.ok()) return ok;
  switch (options.kind) {
    case RuleKind::kAdagrad:
      return std::unique_ptr<SparseUpdateRule>(
          new SparseAdagrad(options.adagrad, rows, dim));
    case RuleKind::kAdam:
      return std::unique_ptr<SparseUpdateRule>(
          new SparseAdam(options.adam, rows, dim));
    default:
      return std::unique_ptr<SparseUpdateRule>(new SparseSgd(rows, dim));
  }
}

void MergeRows(absl::Span<const int64_t> ids, const float* grads, int64_t dim,
               std::vector<int64_t>* rows, std::vector<float>* summed) {
  // Positions sorted by id, stably: each id's occurrences stay in input
  // order, which fixes the order of every sum.
  std::vector<int64_t> order(ids.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return ids[a] < ids[b]; });
  rows->clear();
  summed->clear();
  for (int64_t pos : order) {
    const float* g = grads + pos * dim;
    if (rows->empty() || rows->back() != ids[pos]) {
      rows->push_back(ids[pos]);
      summed->insert(summed->end(), g, g + dim);
      continue;
    }
    float* acc = summed->data() + summed->size() - dim;
    for (int64_t i = 0; i < dim; ++i) acc[i] += g[i];
  }
}

}  // namespace cohort

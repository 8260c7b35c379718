// Row-wise (sparse) optimizer steps for embedding tables: each step updates
// only the rows a batch touched, exactly as PyTorch 1.13 steps an
// nn.EmbeddingBag(sparse=True) weight:
//
//   SGD (torch.optim.SGD, sparse gradient): p[r] -= lr * g[r].
//   Adagrad (torch.optim.Adagrad, sparse gradient): t += 1 every step;
//          s[r] += g[r]^2 (s starts at initial_accumulator_value);
//          p[r] -= lr / (1 + (t - 1) lr_decay) * g[r] / (sqrt(s[r]) + eps).
//          On the touched rows this is bit-identical to the dense rule
//          (kernels/update_rules.h MakeAdagradRule, weight decay 0) given
//          the same gradient with zeros elsewhere: a zero gradient leaves a
//          dense row and its sum unchanged, so both rules agree everywhere.
//   SparseAdam (torch.optim.SparseAdam, "lazy Adam"): t += 1 every step;
//          for touched rows only: m[r] += (1 - b1) (g[r] - m[r]);
//          v[r] += (1 - b2) (g[r]^2 - v[r]);
//          p[r] -= lr sqrt(1 - b2^t) / (1 - b1^t) * m[r] / (sqrt(v[r]) + eps).
//          This is NOT dense Adam with zeros for the untouched rows: dense
//          Adam decays every row's moments (m *= b1, v *= b2) and moves
//          rows whose moments are non-zero even without a gradient, while
//          SparseAdam leaves untouched rows and their moments alone, and
//          puts eps outside the bias correction of v.
//
// The step count t is the table's (the optimizer's per-parameter count in
// PyTorch): it advances once per Step call, however few rows were touched,
// so the caller calls Step once per optimizer step in which the table has a
// gradient, with an empty row list if need be.
//
// What PyTorch refuses with sparse gradients is refused here too, by
// MakeSparseUpdateRule: SGD momentum, Nesterov and weight decay, Adagrad
// and Adam weight decay, AdamW, and the rules without a sparse form
// (RMSprop, LAMB, LARS).
//
// State layout: per row, state_per_row() floats beside each other (Adagrad:
// the row's sums; SparseAdam: the row's m then its v; SGD: none). A rule
// made for a table of rows allocates that state densely (Step and State);
// a rule made for 0 rows owns nothing and steps rows whose values and state
// live in the caller's store at arbitrary slots (StepSlots): a parameter-
// server shard keeps only the rows a gradient reached (Adam on a dense
// 40M x 64 table would be 20 GB), creating each row's state with
// InitRowState. Both paths run the same row kernels, so they agree bit for
// bit.
//
// Ownership: a rule owns its dense state, sized at construction; Step and
// StepSlots never allocate. The caller owns the table (or the store of rows
// and their state) and the gradients. Thread safety:
// none; one thread steps a given rule (Step itself splits the rows over the
// compute threads, with results independent of their number).
#ifndef COHORT_KERNELS_SPARSE_UPDATE_RULES_H_
#define COHORT_KERNELS_SPARSE_UPDATE_RULES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/update_options.h"

namespace cohort {

class SparseUpdateRule {
 public:
  virtual ~SparseUpdateRule() = default;

  // Steps rows `rows` (unique, strictly ascending, within the table: see
  // MergeRows) of `table` ({num_rows(), dim} floats, row-major) with their
  // gradients `grads` ({rows.size(), dim}) at learning rate `lr`, and
  // advances the step count. `dim` must be the rule's (a programmer error
  // otherwise). InvalidArgument, changing nothing, if a row is out of range
  // or the rows are not strictly ascending: row ids come from data.
  absl::Status Step(float* table, int64_t dim, absl::Span<const int64_t> rows,
                    const float* grads, double lr);

  // Steps rows kept in the caller's store: the k-th row's values are at
  // values + slots[k] * dim() and its state at state + slots[k] *
  // state_per_row(); its gradient at grads + k * dim(). Advances the step
  // count once, whatever the number of rows (none included). The slots must
  // be distinct and lie within the caller's buffers: a programmer error
  // otherwise, unchecked (the caller maps checked row ids to its slots).
  void StepSlots(float* values, float* state, absl::Span<const int64_t> slots,
                 const float* grads, double lr);

  // Floats of state per row (0 for SGD), and row `row`'s dense state.
  virtual int state_per_row() const = 0;
  absl::Span<float> State(int64_t row);

  // Writes a row's state before its first step (state_per_row() floats):
  // Adagrad's initial_accumulator_value, SparseAdam's zero moments.
  void InitRowState(float* state) const;

  // The table's scalar state for checkpoints: steps taken so far.
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }

  int64_t num_rows() const { return num_rows_; }
  int64_t dim() const { return dim_; }

 protected:
  SparseUpdateRule(int64_t num_rows, int64_t dim, int state_per_row,
                   float state_init);

  // Steps entries [begin, end) of `slots` (StepSlots' layout) at step
  // `steps()` (this one counted); called concurrently on disjoint ranges.
  virtual void StepRows(float* values, float* state,
                        absl::Span<const int64_t> slots, const float* grads,
                        double lr, int64_t begin, int64_t end) = 0;

 private:
  int64_t num_rows_;
  int64_t dim_;
  int64_t state_stride_;
  float state_init_;
  std::vector<float> state_;  // num_rows_ x state_stride_
  int64_t steps_ = 0;
};

// The rule `options.kind` names for a {rows, dim} table: kSgd, kAdagrad or
// kAdam (SparseAdam, with adam.beta1, beta2 and eps); for 0 rows, a rule
// that steps only a caller's store (StepSlots). InvalidArgument naming the
// option for anything PyTorch refuses with sparse gradients (see above),
// and for a negative row count or a dim below 1.
absl::StatusOr<std::unique_ptr<SparseUpdateRule>> MakeSparseUpdateRule(
    const RuleOptions& options, int64_t rows, int64_t dim);

// Sums the gradients of repeated row ids: `ids` (any order, repeats) with
// their gradients `grads` ({ids.size(), dim}) become the unique ids in
// ascending order (`rows`) and their summed gradients (`summed`, {rows
// size, dim}). Each sum adds a row's gradients in the order their ids
// appear in `ids`, left to right, starting from the first: the result
// depends only on the input, bit for bit. Replaces both outputs.
void MergeRows(absl::Span<const int64_t> ids, const float* grads, int64_t dim,
               std::vector<int64_t>* rows, std::vector<float>* summed);

}  // namespace cohort

#endif  // COHORT_KERNELS_SPARSE_UPDATE_RULES_H_

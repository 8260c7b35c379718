// One sparse table (proto/ps.proto SparseTableInfo) on one parameter-server
// shard: the rows of it that a gradient reached, their optimizer state and
// the table's row-wise update rule (kernels/sparse_update_rules.h).
//
// A table may have tens of millions of rows, of which a shard stores only
// those it owns that were ever stepped: rows are created lazily, at their
// first gradient, with SparseRowInit's value (common/sparse_rows.h) and the
// rule's fresh state. A hash map takes a row id to its slot; values and
// state lie in slot order in two flat buffers that grow geometrically, so
// that a new row costs no allocation of its own. A row never stored reads
// as its initial value, computed on the fly.
//
// Ownership: the store owns its rows, their state and its rule. Thread
// safety: thread-compatible (ShardState's mutex guards it); const methods
// may run concurrently.
#ifndef COHORT_SERVER_PS_ROW_STORE_H_
#define COHORT_SERVER_PS_ROW_STORE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/update_options.h"
#include "kernels/sparse_update_rules.h"
#include "proto/ps.pb.h"

namespace cohort {

class RowStore {
 public:
  // A store's state, as a checkpoint holds it: the stored rows' ids in slot
  // order, their values ({ids.size(), dim}) and rule state ({ids.size(),
  // state_per_row}), and the rule's step count.
  struct Contents {
    std::vector<int64_t> ids;
    std::vector<float> values;
    std::vector<float> state;
    int64_t steps = 0;
  };

  // An empty store for `table` (rows > 0, dim > 0: the caller checked it)
  // stepped by the rule `options` names. INVALID_ARGUMENT, from
  // MakeSparseUpdateRule, when that rule has no row-wise form.
  static absl::StatusOr<std::unique_ptr<RowStore>> Make(
      const SparseTableInfo& table, const RuleOptions& options);

  RowStore(const RowStore&) = delete;
  RowStore& operator=(const RowStore&) = delete;

  const SparseTableInfo& table() const { return table_; }
  int64_t dim() const { return dim_; }
  int state_per_row() const { return rule_->state_per_row(); }
  // Rows stored.
  int64_t size() const { return static_cast<int64_t>(ids_.size()); }
  int64_t steps() const { return rule_->steps(); }

  // The values of rows `ids` (any order, repeats allowed, each within the
  // table: the caller checked them) into `out` ({ids.size(), dim}). A row
  // not stored reads as its initial value and stays not stored.
  void Read(absl::Span<const int64_t> ids, float* out) const;

  // One step of the rule: creates the rows of `rows` not stored yet, then
  // steps `rows` (unique, strictly ascending) with `grads` ({rows.size(),
  // dim}) at `lr`. The step count advances once, even with no rows.
  // INVALID_ARGUMENT, changing nothing, for a row outside the table or rows
  // not strictly ascending.
  absl::Status Apply(absl::Span<const int64_t> rows, const float* grads,
                     double lr);

  // A copy of the state (its cost grows with the rows stored).
  Contents Capture() const;
  // Replaces the state with `c`. INVALID_ARGUMENT naming the table and the
  // field when `c` is inconsistent (sizes, an id outside the table or
  // stored twice, a negative step count); the store is unchanged then.
  absl::Status Restore(Contents c);

 private:
  RowStore(const SparseTableInfo& table,
           std::unique_ptr<SparseUpdateRule> rule);
  // The slot of `row`, created (initial value and fresh state) if absent.
  int64_t SlotOf(int64_t row);
  // Capacity for `rows` rows in total, doubling when it grows.
  void Reserve(int64_t rows);

  SparseTableInfo table_;
  int64_t dim_;
  std::unique_ptr<SparseUpdateRule> rule_;
  absl::flat_hash_map<int64_t, int64_t> slot_of_;  // row id -> slot
  std::vector<int64_t> ids_;                       // slot -> row id
  std::vector<float> values_;                      // slot-major, dim_ each
  std::vector<float> state_;                       // state_per_row() each
};

}  // namespace cohort

#endif  // COHORT_SERVER_PS_ROW_STORE_H_

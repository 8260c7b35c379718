#include "server/ps/row_store.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/sparse_rows.h"
#include "common/status_macros.h"

namespace cohort {

absl::StatusOr<std::unique_ptr<RowStore>> RowStore::Make(
    const SparseTableInfo& table, const RuleOptions& options) {
  // A rule for 0 rows owns no state: the store keeps it, row by row.
  ASSIGN_OR_RETURN(std::unique_ptr<SparseUpdateRule> rule,
                   MakeSparseUpdateRule(options, /*rows=*/0, table.dim()));
  return std::unique_ptr<RowStore>(new RowStore(table, std::move(rule)));
}

RowStore::RowStore(const SparseTableInfo& table,
                   std::unique_ptr<SparseUpdateRule> rule)
    : table_(table), dim_(table.dim()), rule_(std::move(rule)) {}

void RowStore::Read(absl::Span<const int64_t> ids, float* out) const {
  for (size_t k = 0; k < ids.size(); ++k) {
    float* row = out + k * dim_;
    auto it = slot_of_.find(ids[k]);
    if (it != slot_of_.end()) {
      std::memcpy(row, values_.data() + it->second * dim_,
                  dim_ * sizeof(float));
    } else {
      SparseRowInit(table_.seed(), ids[k], dim_, table_.bound(), row);
    }
  }
}

void RowStore::Reserve(int64_t rows) {
  if (rows <= static_cast<int64_t>(ids_.capacity())) return;
  const int64_t capacity =
      std::max<int64_t>(rows, 2 * static_cast<int64_t>(ids_.capacity()));
  ids_.reserve(capacity);
  values_.reserve(capacity * dim_);
  state_.reserve(capacity * state_per_row());
}

int64_t RowStore::SlotOf(int64_t row) {
  const int64_t next = size();
  auto [it, inserted] = slot_of_.try_emplace(row, next);
  if (!inserted) return it->second;
  const int spr = state_per_row();
  Reserve(next + 1);
  ids_.push_back(row);
  values_.resize((next + 1) * dim_);
  state_.resize((next + 1) * spr);
  SparseRowInit(table_.seed(), row, dim_, table_.bound(),
                values_.data() + next * dim_);
  rule_->InitRowState(state_.data() + next * spr);
  return next;
}

absl::Status RowStore::Apply(absl::Span<const int64_t> rows, const float* grads,
                             double lr) {
  for (size_t k = 0; k < rows.size(); ++k) {
    if (rows[k] < 0 || rows[k] >= table_.rows()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table ", table_.id(), " ('", table_.name(), "'): row id ", rows[k],
          " is outside its ", table_.rows(), " rows"));
    }
    if (k > 0 && rows[k] <= rows[k - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table ", table_.id(), " ('", table_.name(), "'): row id ", rows[k],
          " follows ", rows[k - 1], " (rows must be unique and ascending)"));
    }
  }
  // Every new row first, since creating one may move the buffers.
  Reserve(size() + static_cast<int64_t>(rows.size()));
  std::vector<int64_t> slots(rows.size());
  for (size_t k = 0; k < rows.size(); ++k) slots[k] = SlotOf(rows[k]);
  rule_->StepSlots(values_.data(), state_.data(), slots, grads, lr);
  return absl::OkStatus();
}

RowStore::Contents RowStore::Capture() const {
  Contents c;
  c.ids = ids_;
  c.values = values_;
  c.state = state_;
  c.steps = rule_->steps();
  return c;
}

absl::Status RowStore::Restore(Contents c) {
  const std::string what =
      absl::StrCat("table ", table_.id(), " ('", table_.name(), "')");
  const size_t n = c.ids.size();
  if (c.values.size() != n * dim_ || c.state.size() != n * state_per_row()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", n, " row ids with ", c.values.size(),
                     " values and ", c.state.size(), " state values (rows of ",
                     dim_, " values and ", state_per_row(), " state values)"));
  }
  if (c.steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": step count ", c.steps, " is negative"));
  }
  absl::flat_hash_map<int64_t, int64_t> slot_of;
  slot_of.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    const int64_t id = c.ids[k];
    if (id < 0 || id >= table_.rows()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": row id ", id, " is outside its ", table_.rows(), " rows"));
    }
    if (!slot_of.try_emplace(id, k).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": row id ", id, " is stored twice"));
    }
  }
  slot_of_ = std::move(slot_of);
  ids_ = std::move(c.ids);
  values_ = std::move(c.values);
  state_ = std::move(c.state);
  rule_->set_steps(c.steps);
  return absl::OkStatus();
}

}  // namespace cohort

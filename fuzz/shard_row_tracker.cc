#include "fuzz/shard_row_tracker.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/sparse_rows.h"
#include "fuzz/fuzz_util.h"

namespace cohort {
namespace fuzz {
namespace {

bool Tame(float g) {
  return std::isfinite(g) && std::fabs(g) <= RowTracker::kTameGradient;
}

bool AllFinite(const float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) return false;
  }
  return true;
}

std::string RowName(const SparseTableInfo& t, int64_t id) {
  return absl::StrCat("table ", t.id(), " (bound ", t.bound(), ") row ", id);
}

}  // namespace

void RowTracker::NoteSent(
    const google::protobuf::RepeatedPtrField<PushRequest>& push) {
  for (const PushRequest& r : push) {
    if (r.has_header()) {
      const double lr = r.header().lr();
      if (!(lr <= kTameLr)) wild_lr_ = true;  // NaN included
    }
    if (!r.has_rows()) continue;
    const std::string& data = r.rows().data();
    bool tame = true;
    for (size_t at = 0; at + 4 <= data.size() && tame; at += 4) {
      float g;
      std::memcpy(&g, data.data() + at, 4);
      tame = Tame(g);
    }
    if (tame) continue;
    for (int64_t id : r.rows().ids()) wild_.insert({r.rows().table(), id});
  }
}

void RowTracker::NoteApplied(const PushedRows& rows) {
  for (size_t t = 0; t < rows.tables.size(); ++t) {
    for (int64_t id : rows.tables[t].ids) {
      applied_.insert({static_cast<int32_t>(t), id});
    }
  }
}

void RowTracker::CheckRow(const SparseTableInfo& table, int64_t id,
                          const float* values) {
  const Row row{table.id(), id};
  const int64_t dim = table.dim();
  if (!applied_.contains(row)) {
    std::vector<float> init(dim);
    SparseRowInit(table.seed(), id, dim, table.bound(), init.data());
    FUZZ_CHECK(std::memcmp(init.data(), values, dim * sizeof(float)) == 0,
               absl::StrCat(RowName(table, id),
                            " was never pushed but does not read as its "
                            "initial value"));
    FUZZ_CHECK(AllFinite(values, dim),
               absl::StrCat(RowName(table, id),
                            " reads as an initial value that is not finite"));
  } else if (!wild_lr_ && !wild_.contains(row)) {
    FUZZ_CHECK(AllFinite(values, dim),
               absl::StrCat(RowName(table, id),
                            " is not finite after tame gradients (every one "
                            "finite, |g| <= ",
                            kTameGradient, ", lr <= ", kTameLr, ")"));
  }
  if (watched_.size() < kMaxWatched && watched_set_.insert(row).second) {
    watched_.push_back(row);
  }
}

void RowTracker::CheckPulled(const SparseLayout& layout,
                             const PullRowsRequest& request,
                             const ShardState::RowsSnapshot& snap) {
  FUZZ_CHECK(static_cast<int>(snap.tables.size()) == request.tables_size(),
             absl::StrCat("PullRows answered ", snap.tables.size(),
                          " tables for ", request.tables_size()));
  for (int k = 0; k < request.tables_size(); ++k) {
    const RowChunk& want = request.tables(k);
    const ShardState::RowsSnapshot::Table& got = snap.tables[k];
    FUZZ_CHECK(got.table == want.table() && want.table() >= 0 &&
                   want.table() < static_cast<int>(layout.tables.size()),
               absl::StrCat("PullRows answered table ", got.table, " for ",
                            want.table()));
    const SparseTableInfo& t = layout.tables[want.table()];
    FUZZ_CHECK(got.dim == t.dim() &&
                   std::equal(got.ids.begin(), got.ids.end(),
                              want.ids().begin(), want.ids().end()) &&
                   got.values.size() == got.ids.size() * t.dim(),
               absl::StrCat("PullRows' rows of table ", t.id(),
                            " do not match the request"));
    for (size_t i = 0; i < got.ids.size(); ++i) {
      CheckRow(t, got.ids[i], got.values.data() + i * t.dim());
    }
  }
}

void RowTracker::CheckHeld(const ShardState& state,
                           Consistency consistency) const {
  const int64_t held = state.Stats().rows_held();
  const int64_t applied = static_cast<int64_t>(applied_.size());
  FUZZ_CHECK(consistency == SYNC ? held <= applied : held == applied,
             absl::StrCat("the shard holds ", held, " rows after pushes of ",
                          applied, " distinct row ids"));
}

RowTracker::Seen RowTracker::Observe(ShardState& state) const {
  Seen seen;
  seen.held = state.Stats().rows_held();
  if (watched_.empty()) return seen;
  PullRowsRequest request;
  for (const Row& row : watched_) {
    RowChunk* c = request.add_tables();
    c->set_table(row.first);
    c->add_ids(row.second);
  }
  // Clock 0 of rank 0 is readable at once in every mode, once initialized.
  absl::StatusOr<ShardState::RowsSnapshot> snap =
      state.PullRows(request, absl::InfinitePast());
  if (!snap.ok()) return seen;
  std::vector<float>& values = seen.watched.emplace();
  for (const ShardState::RowsSnapshot::Table& t : snap->tables) {
    values.insert(values.end(), t.values.begin(), t.values.end());
  }
  return seen;
}

void RowTracker::CheckUnchanged(const Seen& before, const Seen& after,
                                const std::string& what) {
  FUZZ_CHECK(after.held == before.held,
             absl::StrCat(what, " changed the rows held from ", before.held,
                          " to ", after.held));
  if (!before.watched.has_value()) return;
  FUZZ_CHECK(after.watched.has_value() &&
                 after.watched->size() == before.watched->size() &&
                 std::memcmp(after.watched->data(), before.watched->data(),
                             before.watched->size() * sizeof(float)) == 0,
             absl::StrCat(what, " changed a row pulled before"));
}

}  // namespace fuzz
}  // namespace cohort

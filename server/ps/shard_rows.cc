#include "server/ps/shard_rows.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/ps_limits.h"
#include "common/sparse_rows.h"

namespace cohort {
namespace {

// The most floats of one row: a row travels whole in one chunk.
constexpr int64_t kMaxRowDim = kMaxChunkBytes / 4;

std::string TableName(const SparseTableInfo& t) {
  return absl::StrCat("table ", t.id(), " ('", t.name(), "')");
}

}  // namespace

absl::Status CheckTables(
    const google::protobuf::RepeatedPtrField<SparseTableInfo>& tables,
    absl::string_view what) {
  for (int i = 0; i < tables.size(); ++i) {
    const SparseTableInfo& t = tables[i];
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": sparse table ", i, " ('", t.name(), "') ", why));
    };
    if (t.id() != i) {
      return bad(absl::StrCat("has id ", t.id(),
                              " (tables must be numbered 0, 1, ... in order)"));
    }
    if (t.name().empty()) return bad("has no name");
    if (t.rows() < 1 || t.rows() > kMaxTableRows) {
      return bad(absl::StrCat("has ", t.rows(), " rows, outside [1, ",
                              kMaxTableRows, "]"));
    }
    if (t.dim() < 1 || t.dim() > kMaxRowDim) {
      return bad(absl::StrCat("has dim ", t.dim(), ", outside [1, ", kMaxRowDim,
                              "] (a row travels in one chunk)"));
    }
    // Rows are floats: a larger bound makes initial values of +-inf (and
    // NaN, once 2 * bound overflows a double).
    if (!(t.bound() >= 0 && t.bound() <= std::numeric_limits<float>::max())) {
      return bad(absl::StrCat("has bound ", t.bound(), ", outside [0, ",
                              std::numeric_limits<float>::max(),
                              "] (rows are floats)"));
    }
  }
  return absl::OkStatus();
}

bool SameTable(const SparseTableInfo& a, const SparseTableInfo& b) {
  return a.id() == b.id() && a.name() == b.name() && a.rows() == b.rows() &&
         a.dim() == b.dim() && a.seed() == b.seed() && a.bound() == b.bound();
}

absl::Status CheckRowIds(const SparseLayout& layout, int32_t table,
                         absl::Span<const int64_t> ids,
                         absl::string_view what) {
  if (table < 0 || table >= static_cast<int32_t>(layout.tables.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": unknown sparse table ", table, " (the job has ",
                     layout.tables.size(), ")"));
  }
  const SparseTableInfo& t = layout.tables[table];
  for (int64_t id : ids) {
    if (id < 0 || id >= t.rows()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", TableName(t), " row id ", id,
                       " is outside its ", t.rows(), " rows"));
    }
    const int owner = SparseRowOwner(table, id, layout.num_shards);
    if (owner != layout.shard_index) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": ", TableName(t), " row id ", id, " belongs to shard ", owner,
          ", not to this shard ", layout.shard_index));
    }
  }
  return absl::OkStatus();
}

int64_t PushedRows::rows() const {
  int64_t n = 0;
  for (const Table& t : tables) n += t.ids.size();
  return n;
}

int64_t PushedRows::bytes() const {
  int64_t n = 0;
  for (const Table& t : tables) n += t.ids.size() * 8 + t.grads.size() * 4;
  return n;
}

RowAssembler::RowAssembler(SparseLayout layout, std::string what)
    : layout_(std::move(layout)), what_(std::move(what)) {
  rows_.tables.resize(layout_.tables.size());
  seen_.resize(layout_.tables.size());
}

absl::Status RowAssembler::Add(const RowChunk& chunk) {
  const std::string& data = chunk.data();
  if (static_cast<int64_t>(data.size()) > kMaxChunkBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what_, ": a row chunk of sparse table ", chunk.table(), " has ",
        data.size(), " bytes, more than the limit of ", kMaxChunkBytes));
  }
  const absl::Span<const int64_t> ids(chunk.ids().data(), chunk.ids_size());
  if (absl::Status s = CheckRowIds(layout_, chunk.table(), ids, what_);
      !s.ok()) {
    return s;
  }
  const SparseTableInfo& t = layout_.tables[chunk.table()];
  const uint64_t want = static_cast<uint64_t>(ids.size()) * t.dim() * 4;
  if (data.size() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat(what_, ": ", TableName(t), " chunk of ", ids.size(),
                     " row ids has ", data.size(), " bytes of data, not ", want,
                     " (", t.dim(), " floats per row)"));
  }
  absl::flat_hash_set<int64_t>& seen = seen_[chunk.table()];
  for (size_t k = 0; k < ids.size(); ++k) {
    if (!seen.insert(ids[k]).second) {
      // Undo this chunk's ids, so that the collector stays as it was.
      for (size_t j = 0; j < k; ++j) seen.erase(ids[j]);
      return absl::InvalidArgumentError(
          absl::StrCat(what_, ": ", TableName(t), " row id ", ids[k],
                       " is pushed twice (a push holds each row once)"));
    }
  }
  PushedRows::Table& out = rows_.tables[chunk.table()];
  out.ids.insert(out.ids.end(), ids.begin(), ids.end());
  // With no rows the table's gradients may still be empty, and an empty
  // vector's data() null, which memcpy's pointers must never be (even for
  // 0 bytes).
  if (ids.empty()) return absl::OkStatus();
  const size_t at = out.grads.size();
  out.grads.resize(at + ids.size() * t.dim());
  std::memcpy(out.grads.data() + at, data.data(), data.size());
  return absl::OkStatus();
}

PushedRows RowAssembler::Finish() {
  PushedRows out = std::move(rows_);
  rows_.tables.assign(layout_.tables.size(), {});
  for (auto& s : seen_) s.clear();
  return out;
}

}  // namespace cohort

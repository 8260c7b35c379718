#include "client/ps_rows.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/ps_limits.h"
#include "common/sparse_rows.h"

namespace cohort {
namespace {

std::string TableName(const SparseTableInfo& t) {
  return absl::StrCat("table ", t.id(), " (", t.name(), ")");
}

// INVALID_ARGUMENT unless `table` names one of `tables` and `ids` are rows
// of it.
absl::Status CheckRows(const char* op, int table, absl::Span<const int64_t> ids,
                       const std::vector<SparseTableInfo>& tables) {
  if (table < 0 || table >= static_cast<int>(tables.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": there is no sparse table ", table,
                     " (the model has ", tables.size(), ")"));
  }
  const SparseTableInfo& t = tables[table];
  for (int64_t id : ids) {
    if (id < 0 || id >= t.rows()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", TableName(t), " has no row ", id,
                       " (its rows are 0..", t.rows() - 1, ")"));
    }
  }
  return absl::OkStatus();
}

// Per shard, the chunks of one table's rows being gathered for it; the
// shard's tables in the order they first appear.
struct ShardGroups {
  std::vector<int> slot;  // by table: index into ids / dst, or -1
  std::vector<int> table;
  std::vector<std::vector<int64_t>> ids;
  std::vector<std::vector<float*>> dst;
};

// Cuts one shard's gathered rows into calls of at most kMaxChunkBytes of
// ids each.
std::vector<RowsPullCall> CutCalls(const ShardGroups& g) {
  constexpr int64_t kIdsPerCall = kMaxChunkBytes / kMaxIdBytes;
  std::vector<RowsPullCall> calls;
  int64_t room = 0;
  for (size_t k = 0; k < g.table.size(); ++k) {
    const std::vector<int64_t>& ids = g.ids[k];
    for (size_t off = 0; off < ids.size();) {
      if (room == 0) {
        calls.emplace_back();
        room = kIdsPerCall;
      }
      const int64_t take =
          std::min<int64_t>(room, static_cast<int64_t>(ids.size() - off));
      RowChunk* c = calls.back().request.add_tables();
      c->set_table(g.table[k]);
      c->mutable_ids()->Add(ids.begin() + off, ids.begin() + off + take);
      calls.back().dst.insert(calls.back().dst.end(), g.dst[k].begin() + off,
                              g.dst[k].begin() + off + take);
      off += take;
      room -= take;
    }
  }
  return calls;
}

}  // namespace

int64_t RowsPerChunk(int64_t dim) {
  return std::max<int64_t>(1, kMaxChunkBytes / (dim * 4 + kMaxIdBytes));
}

absl::Status CheckSparseTables(const std::vector<SparseTableInfo>& tables) {
  for (size_t i = 0; i < tables.size(); ++i) {
    const SparseTableInfo& t = tables[i];
    if (t.id() != static_cast<int>(i)) {
      return absl::InvalidArgumentError(
          absl::StrCat("sparse table ", i, " (", t.name(), ") has id ", t.id(),
                       "; the tables' ids must be 0, 1, ... in order"));
    }
    if (t.rows() < 0 || t.dim() < 1 ||
        t.dim() * int64_t{4} + kMaxIdBytes > kMaxChunkBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sparse ", TableName(t), " has ", t.rows(), " rows of dim ", t.dim(),
          "; a row must fit in ", kMaxChunkBytes, " bytes"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<PsRows>>> SplitRowsByOwner(
    const std::vector<PsRows>& rows, const std::vector<SparseTableInfo>& tables,
    int shards) {
  std::vector<std::vector<PsRows>> out(shards);
  for (const PsRows& r : rows) {
    if (absl::Status s = CheckRows("push", r.table, r.ids, tables); !s.ok()) {
      return s;
    }
    const int64_t dim = tables[r.table].dim();
    if (r.grads.size() != r.ids.size() * dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "push: ", TableName(tables[r.table]), ": ", r.grads.size(),
          " gradient values for ", r.ids.size(), " rows of dim ", dim));
    }
    std::vector<PsRows*> mine(shards, nullptr);
    for (size_t i = 0; i < r.ids.size(); ++i) {
      const int s = SparseRowOwner(r.table, r.ids[i], shards);
      if (mine[s] == nullptr) {
        out[s].emplace_back();
        mine[s] = &out[s].back();
        mine[s]->table = r.table;
      }
      mine[s]->ids.push_back(r.ids[i]);
      mine[s]->grads.insert(mine[s]->grads.end(), r.grads.begin() + i * dim,
                            r.grads.begin() + (i + 1) * dim);
    }
  }
  return out;
}

bool WriteRowChunks(const std::vector<PsRows>& rows,
                    const std::vector<SparseTableInfo>& tables,
                    grpc::ClientWriterInterface<PushRequest>* writer,
                    int64_t* bytes) {
  PushRequest msg;
  RowChunk* chunk = msg.mutable_rows();
  for (const PsRows& r : rows) {
    const int64_t dim = tables[r.table].dim();
    const int64_t per_chunk = RowsPerChunk(dim);
    const int64_t n = r.ids.size();
    chunk->set_table(r.table);
    for (int64_t off = 0; off < n; off += per_chunk) {
      const int64_t len = std::min(per_chunk, n - off);
      chunk->mutable_ids()->Clear();
      chunk->mutable_ids()->Add(r.ids.begin() + off, r.ids.begin() + off + len);
      chunk->set_data(reinterpret_cast<const char*>(r.grads.data() + off * dim),
                      len * dim * 4);
      if (!writer->Write(msg)) return false;
      *bytes += len * dim * 4;
    }
  }
  return true;
}

absl::StatusOr<std::vector<std::vector<RowsPullCall>>> PlanRowsPull(
    absl::Span<const PsRowRequest> requests,
    const std::vector<SparseTableInfo>& tables, int shards) {
  std::vector<ShardGroups> groups(shards);
  for (ShardGroups& g : groups) g.slot.assign(tables.size(), -1);
  for (const PsRowRequest& q : requests) {
    if (absl::Status s = CheckRows("pull rows", q.table, q.ids, tables);
        !s.ok()) {
      return s;
    }
    const int64_t dim = tables[q.table].dim();
    for (size_t i = 0; i < q.ids.size(); ++i) {
      ShardGroups& g = groups[SparseRowOwner(q.table, q.ids[i], shards)];
      int& slot = g.slot[q.table];
      if (slot < 0) {
        slot = g.table.size();
        g.table.push_back(q.table);
        g.ids.emplace_back();
        g.dst.emplace_back();
      }
      g.ids[slot].push_back(q.ids[i]);
      g.dst[slot].push_back(q.values + i * dim);
    }
  }
  std::vector<std::vector<RowsPullCall>> plan(shards);
  for (int s = 0; s < shards; ++s) plan[s] = CutCalls(groups[s]);
  return plan;
}

RowsPullReader::RowsPullReader(const RowsPullCall* call,
                               const std::vector<SparseTableInfo>* tables)
    : call_(call), tables_(tables) {
  Reset();
}

void RowsPullReader::Reset() {
  chunk_ = 0;
  pos_ = 0;
  rows_ = 0;
  bytes_ = 0;
  SkipComplete();
}

void RowsPullReader::SkipComplete() {
  const PullRowsRequest& req = call_->request;
  while (chunk_ < req.tables_size() && pos_ == req.tables(chunk_).ids_size()) {
    ++chunk_;
    pos_ = 0;
  }
}

absl::Status RowsPullReader::Add(const RowChunk& c) {
  if (done()) {
    return absl::DataLossError(
        absl::StrCat("more rows than the ", expected(), " asked for"));
  }
  const RowChunk& want = call_->request.tables(chunk_);
  const SparseTableInfo& t = (*tables_)[want.table()];
  if (c.table() != want.table()) {
    return absl::DataLossError(absl::StrCat("rows of table ", c.table(),
                                            " where rows of ", TableName(t),
                                            " were due"));
  }
  const int64_t row_bytes = int64_t{4} * t.dim();
  const int64_t n = c.data().size() / row_bytes;
  const int64_t left = want.ids_size() - pos_;
  if (c.data().size() % row_bytes != 0 || n > left ||
      (c.ids_size() != 0 && c.ids_size() != n)) {
    return absl::DataLossError(
        absl::StrCat("a chunk of ", TableName(t), " with ", c.data().size(),
                     " bytes and ", c.ids_size(), " ids where ", left,
                     " rows of dim ", t.dim(), " were due"));
  }
  for (int64_t i = 0; i < c.ids_size(); ++i) {
    if (c.ids(i) != want.ids(pos_ + i)) {
      return absl::DataLossError(absl::StrCat("row ", c.ids(i), " of ",
                                              TableName(t), " where row ",
                                              want.ids(pos_ + i), " was due"));
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(call_->dst[rows_ + i], c.data().data() + i * row_bytes,
                row_bytes);
  }
  rows_ += n;
  pos_ += n;
  bytes_ += c.data().size();
  SkipComplete();
  return absl::OkStatus();
}

}  // namespace cohort

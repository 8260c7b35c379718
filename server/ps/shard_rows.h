// The sparse tables' side of the shard protocol (proto/ps.proto
// SparseTableInfo, RowChunk): the checks of an Init's tables and of the row
// ids a push or a pull names, and the assembly of a push's row chunks.
//
// Rows of table t belong to shard SparseRowOwner(t, row, shards)
// (common/sparse_rows.h); a shard accepts only its own rows, each below
// its table's rows, and at most once per table in a push.
//
// Thread safety: the functions are thread-safe; RowAssembler is
// thread-compatible (one per request).
#ifndef COHORT_SERVER_PS_SHARD_ROWS_H_
#define COHORT_SERVER_PS_SHARD_ROWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "google/protobuf/repeated_field.h"
#include "proto/ps.pb.h"

namespace cohort {

// Rows a table may have: ids fit in 48 bits, which a checkpoint stores
// exactly as two float tensors of 24 bits each (shard_checkpoint.h).
inline constexpr int64_t kMaxTableRows = int64_t{1} << 48;

// What checking a row id needs: the tables (by id) and this shard's place
// among the shards.
struct SparseLayout {
  std::vector<SparseTableInfo> tables;
  int shard_index = 0;
  int num_shards = 1;
};

// INVALID_ARGUMENT, starting with `what`, unless the tables have ids 0, 1,
// ... in order, non-empty names, 1 to kMaxTableRows rows, a dim from 1 to
// what fits in one chunk (a row never spans two), and a bound from 0 to the
// largest float.
absl::Status CheckTables(
    const google::protobuf::RepeatedPtrField<SparseTableInfo>& tables,
    absl::string_view what);

// Whether two tables are the same in every field.
bool SameTable(const SparseTableInfo& a, const SparseTableInfo& b);

// INVALID_ARGUMENT, starting with `what` and naming the table and the row,
// for an unknown table, a row id outside the table or owned by another
// shard.
absl::Status CheckRowIds(const SparseLayout& layout, int32_t table,
                         absl::Span<const int64_t> ids, absl::string_view what);

// A push's row gradients: per table (by id), the rows pushed and their
// gradients, {ids.size(), dim}. Within a table the ids are unique.
struct PushedRows {
  struct Table {
    std::vector<int64_t> ids;
    std::vector<float> grads;
  };
  std::vector<Table> tables;  // empty, or one per table

  // Rows in all tables, and their bytes on the wire (8 per id, 4 per
  // value).
  int64_t rows() const;
  int64_t bytes() const;
};

// Collects the row chunks of one push, checking each as it arrives (so
// that a malformed push is refused before it has been read whole, and a
// push holds at most each owned row once).
class RowAssembler {
 public:
  // `layout` is this shard's (ShardState::sparse_layout()); `what` starts
  // every error message (e.g. "push from rank 2").
  RowAssembler(SparseLayout layout, std::string what);

  // RESOURCE_EXHAUSTED for data above kMaxChunkBytes; INVALID_ARGUMENT for
  // an unknown table, a row id outside its table, owned by another shard
  // or already pushed, or data that is not ids * dim floats.
  absl::Status Add(const RowChunk& chunk);

  // The rows collected, one entry per table.
  PushedRows Finish();

 private:
  SparseLayout layout_;
  std::string what_;
  PushedRows rows_;
  std::vector<absl::flat_hash_set<int64_t>> seen_;  // per table
};

}  // namespace cohort

#endif  // COHORT_SERVER_PS_SHARD_ROWS_H_

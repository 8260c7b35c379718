// Rows of sparse tables (EmbeddingBagSpec.sparse) on the wire of
// proto/ps.proto: which shard owns which rows (common/sparse_rows.h), row
// chunks cut under the message size limit, and the rows a pull returns put
// back where its caller wants them.
//
// Ownership: a PsRowRequest borrows the caller's ids and values; a
// RowsPullReader borrows its call and tables. Thread safety: the functions
// are thread-safe; a RowsPullReader is used by one thread.
#ifndef COHORT_CLIENT_PS_ROWS_H_
#define COHORT_CLIENT_PS_ROWS_H_

#include <grpcpp/support/sync_stream.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/ps.pb.h"

namespace cohort {

// One sparse table's rows in a push: `ids` (each at most once) and their
// gradients, row after row ({ids.size(), dim}).
struct PsRows {
  int table = 0;  // SparseTableInfo.id
  std::vector<int64_t> ids;
  std::vector<float> grads;
};

// Rows of one sparse table to pull: `ids` into `values` ({ids.size(), dim},
// row after row).
struct PsRowRequest {
  int table = 0;  // SparseTableInfo.id
  absl::Span<const int64_t> ids;
  float* values = nullptr;
};

// The most bytes a row id takes in a message (a varint of 64 bits).
inline constexpr int64_t kMaxIdBytes = 10;

// Rows of `dim` floats per row chunk: ids and data together take at most
// kMaxChunkBytes, so that a message of one chunk stays under
// kMaxMessageBytes, and the data alone at most kMaxChunkBytes as the
// protocol asks.
int64_t RowsPerChunk(int64_t dim);

// INVALID_ARGUMENT unless table i has id i, at least 0 rows, and a dim
// whose row fits in a chunk with its id.
absl::Status CheckSparseTables(const std::vector<SparseTableInfo>& tables);

// `rows` split by owning shard, each shard's tables in the order of `rows`
// and ids in their order. INVALID_ARGUMENT naming the table and row for a
// table that does not exist, a row outside its table, or gradients of the
// wrong size.
absl::StatusOr<std::vector<std::vector<PsRows>>> SplitRowsByOwner(
    const std::vector<PsRows>& rows, const std::vector<SparseTableInfo>& tables,
    int shards);

// Writes `rows` as PushRequest row chunks of RowsPerChunk rows; false once
// the stream is broken. Adds the data's bytes to `bytes`.
bool WriteRowChunks(const std::vector<PsRows>& rows,
                    const std::vector<SparseTableInfo>& tables,
                    grpc::ClientWriterInterface<PushRequest>* writer,
                    int64_t* bytes);

// One PullRows call to one shard: what it asks (the ids; worker, rank and
// clock are the caller's) and where each row it returns goes, in the
// order the request names them.
struct RowsPullCall {
  PullRowsRequest request;
  std::vector<float*> dst;
};

// The calls that fill `requests`, per shard (none for a shard that owns
// none of the rows): the ids of a request go to their owners, one row chunk
// per table in each call, and a call's ids take at most kMaxChunkBytes.
// INVALID_ARGUMENT naming the table and row for a table that does not
// exist or a row outside its table.
absl::StatusOr<std::vector<std::vector<RowsPullCall>>> PlanRowsPull(
    absl::Span<const PsRowRequest> requests,
    const std::vector<SparseTableInfo>& tables, int shards);

// Copies the row chunks a PullRows call returns to their destinations,
// checking that they come in the order asked.
class RowsPullReader {
 public:
  RowsPullReader(const RowsPullCall* call,
                 const std::vector<SparseTableInfo>* tables);

  // Forgets what was read (a retried call starts again).
  void Reset();
  // DATA_LOSS for a chunk that is not the next rows asked for.
  absl::Status Add(const RowChunk& chunk);
  bool done() const { return chunk_ == call_->request.tables_size(); }
  int64_t rows() const { return rows_; }
  int64_t expected() const { return call_->dst.size(); }
  int64_t bytes() const { return bytes_; }

 private:
  // Moves past the request's chunks that are complete.
  void SkipComplete();

  const RowsPullCall* call_;
  const std::vector<SparseTableInfo>* tables_;
  int chunk_ = 0;     // the request's chunk being filled
  int64_t pos_ = 0;   // within it
  int64_t rows_ = 0;  // filled, over all chunks
  int64_t bytes_ = 0;
};

}  // namespace cohort

#endif  // COHORT_CLIENT_PS_ROWS_H_

// A sparse table (EmbeddingBagSpec.sparse) as a layer sees it: the table
// itself lives elsewhere (on the parameter-server shards); the layer keeps
// only the rows its last Forward touched, fetched through a RowFetcher, and
// Backward's gradients of those rows.
//
// Ownership: the layer owns its SparseTables; the model hands each one its
// id and the fetcher, which the caller (the engine) owns and keeps alive.
// Thread safety: none; the replica's thread drives a table. A RowFetcher is
// called from every replica's thread at once.
#ifndef COHORT_WORKER_LAYERS_SPARSE_TABLE_H_
#define COHORT_WORKER_LAYERS_SPARSE_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace cohort {

// Rows of one sparse table to fetch: `ids` (unique, ascending) into `values`
// ({ids.size(), dim} floats, row after row).
struct RowRequest {
  int table = 0;  // SparseTable::id()
  absl::Span<const int64_t> ids;
  float* values = nullptr;
};

class RowFetcher {
 public:
  virtual ~RowFetcher() = default;
  // Fills every request's values with the rows as they are for the step
  // being computed; one call for all of a layer's tables. Thread-safe.
  virtual absl::Status Fetch(absl::Span<const RowRequest> requests) = 0;
};

class SparseTable {
 public:
  SparseTable(int64_t rows, int64_t dim) : rows_(rows), dim_(dim) {}

  int64_t rows() const { return rows_; }
  int64_t dim() const { return dim_; }

  // Set by the model (Model::SparseTables, SetRowFetcher).
  int id() const { return id_; }
  void set_id(int id) { id_ = id; }
  RowFetcher* fetcher() const { return fetcher_; }
  void set_fetcher(RowFetcher* fetcher) { fetcher_ = fetcher; }

  // The last Forward's rows, unique and ascending; their values
  // ({ids.size(), dim}); and after Backward their gradients (same layout),
  // summed over the batch's samples in sample order.
  std::vector<int64_t> ids;
  std::vector<float> values;
  std::vector<float> grads;

 private:
  int64_t rows_;
  int64_t dim_;
  int id_ = -1;
  RowFetcher* fetcher_ = nullptr;
};

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_SPARSE_TABLE_H_

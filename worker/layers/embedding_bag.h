// EmbeddingBag: one table per categorical feature (LayerSpec.embedding_bag,
// DLRM's embeddings, an nn.ModuleList of nn.EmbeddingBag).
//
// Input: a flat sample {2 T} of T row ids, dense batch {N, 2 T} (layer.h).
// A row id r travels as the pair of floats (r >> 24, r & 0xFFFFFF), both
// exact below 2^24 in float, so tables may have more than 2^24 rows.
// Output: {T dim}, batch {N, T dim}: features [t dim, (t + 1) dim) of a
// sample hold row r_t of table t. Table t is the parameter "t.weight"
// {rows_t, dim}, so a model's tensors are named "<layer>.<t>.weight", as the
// state_dict of nn.ModuleList([nn.EmbeddingBag(rows_t, dim), ...]) under the
// layer's name; initialised uniform in +-1/sqrt(rows_t) (DLRM's).
//
// Each feature is a bag of one id, so mode MEAN gives what SUM gives; the
// mode is kept for the day bags hold several ids.
//
// Backward writes each table's whole gradient: zeros, then the output
// gradient's rows added in sample order, so repeated rows sum the same way
// every time. Ids have no gradient (grad_in, when asked for, is zeros). An
// id that is not a pair of integers in [0, 2^24), or whose row is past its
// table, is looked up as row 0 and reported by InputError (naming the
// feature), with which the caller fails the step: CRITEO data cannot hold
// one (the spec check and the data set see to it), arrays of ids can.
//
// The gathers and scatter-adds are free functions over (row ids, table), so
// that a path that moves only the rows a batch touches can reuse them.
//
// Sparse tables (EmbeddingBagSpec.sparse) are declared (ParamDecl::sparse)
// but not bound: the layer keeps one SparseTable per table. Forward takes
// each table's unique rows of the batch (ascending), fetches them in one
// RowFetcher call for all tables, and gathers from them; Backward leaves
// those rows' gradients in the SparseTable, summed in sample order. Both
// kinds initialise row r from the table's seed alone (kRowUniform), so a
// sparse model starts where the dense one does. A failed fetch fails the
// step through InputError like a bad id.
//
// Ownership: the tables are views into the model's buffers (Bind); the
// layer owns the last batch's row ids. Forward and Backward allocate
// nothing once the batch size stops changing. Thread safety: none; one
// replica's thread drives a layer (Backward's zeroing runs on the compute
// threads, each writing its own range).
#ifndef COHORT_WORKER_LAYERS_EMBEDDING_BAG_H_
#define COHORT_WORKER_LAYERS_EMBEDDING_BAG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "worker/layers/layer.h"

namespace cohort {

// A row id r travels as (r / kRowIdRadix, r % kRowIdRadix).
inline constexpr int64_t kRowIdRadix = int64_t{1} << 24;

// The row the pair (hi, lo) names, hi * 2^24 + lo; -1 when either is not
// an integer in [0, 2^24) (NaN included).
template <typename T>
int64_t DecodeRowId(T hi, T lo);

// The row ids of `n` samples of {2 T} floats (`in`, sample after sample,
// each feature's pair (hi, lo) in feature order; T = table_rows.size())
// into `rows`, table-major: rows[t * n + s] is sample s's row of table t.
// InvalidArgument naming the sample, the feature and the values when a pair
// is not a row id or its row is at or past table_rows[t].
template <typename T>
absl::Status DecodeRowIds(const T* in, int64_t n,
                          absl::Span<const int64_t> table_rows, int64_t* rows);

// out[s * stride + d] = table[rows[s] * dim + d] for every s and d < dim:
// table {R, dim} row-major, each row one contiguous copy.
template <typename T>
void GatherRows(const T* table, int64_t dim, absl::Span<const int64_t> rows,
                T* out, int64_t stride);

// grad_table[rows[s] * dim + d] += grad[s * stride + d], s ascending, so a
// row that appears several times sums in the same order every time.
template <typename T>
void ScatterAddRows(const T* grad, int64_t stride,
                    absl::Span<const int64_t> rows, int64_t dim, T* grad_table);

enum class EmbeddingBagMode { kSum, kMean };

template <typename T>
class EmbeddingBag : public Layer<T> {
 public:
  // Rows of each table, in feature order, and the features per row;
  // `sparse`: the tables are read by row (above).
  EmbeddingBag(std::vector<int64_t> rows, int64_t dim, EmbeddingBagMode mode,
               bool sparse = false);

  // "embedding_bag(26 tables, dim 16, sum)".
  std::string Name() const override;
  // {2 T} -> {T dim}; InvalidArgument naming the layer and the shapes
  // otherwise, or when a table or dim is not positive.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  // "0.weight", "1.weight"...: table t is {rows[t], dim}.
  std::vector<ParamDecl> Params() const override;
  void Bind(std::vector<BasicTensor<T>> values,
            std::vector<BasicTensor<T>> grads) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;
  // The first bad row id of the last Forward, or its failed fetch
  // (InputError in layer.h).
  absl::Status InputError() const override { return input_error_; }
  void CollectSparseTables(std::vector<SparseTable*>* out) override;

  // Rows of each table, in feature order: a data set's ids must be below
  // them.
  const std::vector<int64_t>& rows() const { return rows_; }
  int64_t dim() const { return dim_; }

 private:
  std::vector<int64_t> rows_;
  int64_t dim_;
  EmbeddingBagMode mode_;
  bool sparse_;
  std::vector<BasicTensor<T>> tables_, grads_;  // views, after Bind
  std::vector<SparseTable> sparse_tables_;      // when sparse_
  // Sparse: per table, each sample's index into its table's ids,
  // table-major like ids_.
  std::vector<int64_t> slots_;
  int64_t batch_ = 0;         // N of the last Forward
  std::vector<int64_t> ids_;  // its rows, table-major (DecodeRowIds)
  absl::Status input_error_;

  // Sparse: the batch's unique rows per table and their fetched values.
  absl::Status FetchRows();
  void SparseForward(BasicTensor<T>* out);
  void SparseBackward(const BasicTensor<T>& grad_out);
};

extern template class EmbeddingBag<float>;
extern template class EmbeddingBag<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_EMBEDDING_BAG_H_

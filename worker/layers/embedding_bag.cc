#include "worker/layers/embedding_bag.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "kernels/elementwise.h"
#include "kernels/parallel.h"

namespace cohort {

template <typename T>
int64_t DecodeRowId(T hi, T lo) {
  const T radix = static_cast<T>(kRowIdRadix);
  // Written so that NaN fails every comparison and is refused.
  if (!(hi >= 0 && hi < radix && lo >= 0 && lo < radix)) return -1;
  const int64_t h = static_cast<int64_t>(hi), l = static_cast<int64_t>(lo);
  if (static_cast<T>(h) != hi || static_cast<T>(l) != lo) return -1;
  return h * kRowIdRadix + l;
}

template <typename T>
absl::Status DecodeRowIds(const T* in, int64_t n,
                          absl::Span<const int64_t> table_rows, int64_t* rows) {
  const int64_t tables = static_cast<int64_t>(table_rows.size());
  for (int64_t s = 0; s < n; ++s) {
    const T* pairs = in + s * 2 * tables;
    for (int64_t t = 0; t < tables; ++t) {
      const T hi = pairs[2 * t], lo = pairs[2 * t + 1];
      const int64_t row = DecodeRowId(hi, lo);
      if (row < 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "sample %d, categorical feature %d: the pair (%.17g, %.17g) is "
            "not a row id (two integers in [0, 2^24): row / 2^24, row mod "
            "2^24)",
            s, t, static_cast<double>(hi), static_cast<double>(lo)));
      }
      if (row >= table_rows[t]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sample ", s, ", categorical feature ", t, ": row ", row,
            " is past its table's ", table_rows[t], " rows (rows[", t, "])"));
      }
      rows[t * n + s] = row;
    }
  }
  return absl::OkStatus();
}

template <typename T>
void GatherRows(const T* table, int64_t dim, absl::Span<const int64_t> rows,
                T* out, int64_t stride) {
  for (size_t s = 0; s < rows.size(); ++s) {
    const T* row = table + rows[s] * dim;
    std::copy(row, row + dim, out + static_cast<int64_t>(s) * stride);
  }
}

template <typename T>
void ScatterAddRows(const T* grad, int64_t stride,
                    absl::Span<const int64_t> rows, int64_t dim,
                    T* grad_table) {
  for (size_t s = 0; s < rows.size(); ++s) {
    const T* g = grad + static_cast<int64_t>(s) * stride;
    T* row = grad_table + rows[s] * dim;
    for (int64_t d = 0; d < dim; ++d) row[d] += g[d];
  }
}

template <typename T>
EmbeddingBag<T>::EmbeddingBag(std::vector<int64_t> rows, int64_t dim,
                              EmbeddingBagMode mode, bool sparse)
    : rows_(std::move(rows)), dim_(dim), mode_(mode), sparse_(sparse) {
  if (sparse_) {
    for (int64_t r : rows_) sparse_tables_.emplace_back(r, dim_);
  }
}

template <typename T>
std::string EmbeddingBag<T>::Name() const {
  return absl::StrCat("embedding_bag(", rows_.size(),
                      sparse_ ? " sparse tables, dim " : " tables, dim ", dim_,
                      mode_ == EmbeddingBagMode::kMean ? ", mean)" : ", sum)");
}

template <typename T>
absl::StatusOr<Shape> EmbeddingBag<T>::Configure(const Shape& in) {
  const int64_t tables = static_cast<int64_t>(rows_.size());
  if (tables == 0 || dim_ <= 0 ||
      std::any_of(rows_.begin(), rows_.end(),
                  [](int64_t r) { return r <= 0; })) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(),
                     ": needs at least one table, every table's rows and dim "
                     "positive"));
  }
  if (in.size() != 1 || in[0] != 2 * tables) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": expects a flat input {", 2 * tables,
        "} (a pair of floats per feature's row id) but got ", ShapeString(in)));
  }
  return Shape{tables * dim_};
}

template <typename T>
std::vector<ParamDecl> EmbeddingBag<T>::Params() const {
  std::vector<ParamDecl> decls;
  for (size_t t = 0; t < rows_.size(); ++t) {
    // U(-1/sqrt(rows), 1/sqrt(rows)) (DLRM's), row by row from the
    // table's seed so that dense and sparse tables start alike.
    ParamDecl d{absl::StrCat(t, ".weight"),
                {rows_[t], dim_},
                ParamDecl::Init::kRowUniform,
                rows_[t]};
    d.sparse = sparse_;
    decls.push_back(std::move(d));
  }
  return decls;
}

template <typename T>
void EmbeddingBag<T>::CollectSparseTables(std::vector<SparseTable*>* out) {
  for (SparseTable& t : sparse_tables_) out->push_back(&t);
}

template <typename T>
void EmbeddingBag<T>::Bind(std::vector<BasicTensor<T>> values,
                           std::vector<BasicTensor<T>> grads) {
  CHECK(values.size() == rows_.size() && grads.size() == rows_.size())
      << Name() << ": Bind";
  tables_ = std::move(values);
  grads_ = std::move(grads);
}

template <typename T>
void EmbeddingBag<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                              Mode mode) {
  const int64_t tables = static_cast<int64_t>(rows_.size());
  CHECK(in.rank() == 2 && in.dim(1) == 2 * tables)
      << Name() << ": input " << ShapeString(in.shape());
  batch_ = in.dim(0);
  // Ids past a bad one stay row 0: the step computes harmlessly and then
  // fails with input_error_.
  ids_.assign(tables * batch_, 0);
  input_error_ = DecodeRowIds(in.data(), batch_, rows_, ids_.data());
  if (!input_error_.ok()) {
    input_error_ = absl::InvalidArgumentError(
        absl::StrCat(Name(), ": ", input_error_.message(),
                     " (the sample counted within its batch)"));
  }
  EnsureShape(out, {batch_, tables * dim_});
  if (sparse_) {
    SparseForward(out);
    return;
  }
  for (int64_t t = 0; t < tables; ++t) {
    GatherRows(tables_[t].data(), dim_,
               absl::MakeConstSpan(ids_.data() + t * batch_, batch_),
               out->data() + t * dim_, tables * dim_);
  }
  (void)mode;  // the ids are kept either way; Backward needs them
}

template <typename T>
void EmbeddingBag<T>::Backward(const BasicTensor<T>& grad_out,
                               BasicTensor<T>* grad_in) {
  const int64_t tables = static_cast<int64_t>(rows_.size());
  CHECK(grad_out.rank() == 2 && grad_out.dim(0) == batch_ &&
        grad_out.dim(1) == tables * dim_)
      << Name() << ": output gradient " << ShapeString(grad_out.shape())
      << " after a Forward of " << batch_ << " samples";
  if (sparse_) SparseBackward(grad_out);
  for (int64_t t = 0; t < tables && !sparse_; ++t) {
    T* g = grads_[t].data();
    // Tables can be large: the zeroing is the pass that costs.
    ParallelRanges(
        rows_[t] * dim_, kElementwiseGrain,
        [g](int64_t a, int64_t b) { std::fill(g + a, g + b, T(0)); });
    ScatterAddRows(grad_out.data() + t * dim_, tables * dim_,
                   absl::MakeConstSpan(ids_.data() + t * batch_, batch_), dim_,
                   g);
  }
  if (grad_in != nullptr) {
    EnsureShape(grad_in, {batch_, 2 * tables});
    std::fill(grad_in->data(), grad_in->data() + grad_in->size(), T(0));
  }
}

// Each table's unique rows (sorted) and each sample's slot among them.
template <typename T>
absl::Status EmbeddingBag<T>::FetchRows() {
  const int64_t tables = static_cast<int64_t>(rows_.size());
  slots_.resize(ids_.size());
  std::vector<RowRequest> requests(tables);
  for (int64_t t = 0; t < tables; ++t) {
    SparseTable& table = sparse_tables_[t];
    const int64_t* ids = ids_.data() + t * batch_;
    table.ids.assign(ids, ids + batch_);
    std::sort(table.ids.begin(), table.ids.end());
    table.ids.erase(std::unique(table.ids.begin(), table.ids.end()),
                    table.ids.end());
    for (int64_t s = 0; s < batch_; ++s) {
      slots_[t * batch_ + s] =
          std::lower_bound(table.ids.begin(), table.ids.end(), ids[s]) -
          table.ids.begin();
    }
    table.values.resize(table.ids.size() * dim_);
    requests[t] = {table.id(), table.ids, table.values.data()};
  }
  RowFetcher* fetcher = sparse_tables_[0].fetcher();
  if (fetcher == nullptr) {
    return absl::FailedPreconditionError(
        "its sparse tables have no row source (they are served by "
        "parameter-server shards, in PS mode)");
  }
  return fetcher->Fetch(requests);
}

template <typename T>
void EmbeddingBag<T>::SparseForward(BasicTensor<T>* out) {
  const int64_t tables = static_cast<int64_t>(rows_.size());
  const absl::Status fetched = FetchRows();
  if (!fetched.ok() && input_error_.ok()) {
    input_error_ = absl::Status(
        fetched.code(),
        absl::StrCat(Name(), ": fetching rows: ", fetched.message()));
  }
  for (int64_t t = 0; t < tables; ++t) {
    const std::vector<float>& values = sparse_tables_[t].values;
    for (int64_t s = 0; s < batch_; ++s) {
      const float* row = values.data() + slots_[t * batch_ + s] * dim_;
      T* o = out->data() + s * tables * dim_ + t * dim_;
      for (int64_t d = 0; d < dim_; ++d) o[d] = static_cast<T>(row[d]);
    }
  }
}

template <typename T>
void EmbeddingBag<T>::SparseBackward(const BasicTensor<T>& grad_out) {
  const int64_t tables = static_cast<int64_t>(rows_.size());
  for (int64_t t = 0; t < tables; ++t) {
    SparseTable& table = sparse_tables_[t];
    table.grads.assign(table.ids.size() * dim_, 0.0f);
    for (int64_t s = 0; s < batch_; ++s) {
      const T* g = grad_out.data() + s * tables * dim_ + t * dim_;
      float* row = table.grads.data() + slots_[t * batch_ + s] * dim_;
      for (int64_t d = 0; d < dim_; ++d) row[d] += static_cast<float>(g[d]);
    }
  }
}

#define COHORT_INSTANTIATE_ROWS(T)                                            \
  template int64_t DecodeRowId<T>(T, T);                                      \
  template absl::Status DecodeRowIds<T>(const T*, int64_t,                    \
                                        absl::Span<const int64_t>, int64_t*); \
  template void GatherRows<T>(const T*, int64_t, absl::Span<const int64_t>,   \
                              T*, int64_t);                                   \
  template void ScatterAddRows<T>(const T*, int64_t,                          \
                                  absl::Span<const int64_t>, int64_t, T*);
COHORT_INSTANTIATE_ROWS(float)
COHORT_INSTANTIATE_ROWS(double)
#undef COHORT_INSTANTIATE_ROWS

template class EmbeddingBag<float>;
template class EmbeddingBag<double>;

}  // namespace cohort

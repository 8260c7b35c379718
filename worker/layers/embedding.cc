#include "worker/layers/embedding.h"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/parallel.h"
#include "kernels/transpose8.h"

namespace cohort {
namespace {

// Tile edge of the positional table's transposes.
constexpr int64_t kTile = 32;

// Columns per step of the vector gather/scatter: 16 floats fill one cache
// line of each output row, so lines are written whole.
constexpr int64_t kChunk = 16;

// Resizes `t` to {a, b, c} unless it already has that shape: building a
// Shape allocates, and this runs every step.
template <typename T>
void EnsureShape(BasicTensor<T>* t, int64_t a, int64_t b, int64_t c) {
  if (t->rank() != 3 || t->dim(0) != a || t->dim(1) != b || t->dim(2) != c) {
    t->Resize({a, b, c});
  }
}

// out[d * cols + j] = w[ids[j] * dim + d] over d in [d0, d1), j in [j0, j1).
// Feature-major, so each output row is written sequentially (the weight,
// V x D, is read from cache).
template <typename T>
void GatherScalar(const T* w, const int32_t* ids, int64_t cols, int64_t dim,
                  int64_t j0, int64_t j1, int64_t d0, int64_t d1, T* out) {
  for (int64_t d = d0; d < d1; ++d) {
    T* o = out + d * cols;
    const T* wd = w + d;
    for (int64_t j = j0; j < j1; ++j) o[j] = wd[ids[j] * dim];
  }
}

// gw[ids[j] * dim + d] += g[d * cols + j], the same region.
template <typename T>
void ScatterScalar(const T* g, const int32_t* ids, int64_t cols, int64_t dim,
                   int64_t j0, int64_t j1, int64_t d0, int64_t d1, T* gw) {
  for (int64_t d = d0; d < d1; ++d) {
    const T* gd = g + d * cols;
    T* wd = gw + d;
    for (int64_t j = j0; j < j1; ++j) wd[ids[j] * dim] += gd[j];
  }
}

#ifdef __AVX2__
// The gather over j < cols rounded down to kChunk and d < dim rounded down
// to 8: 8 weight rows x 8 features loaded, turned around in registers,
// stored as 8 runs of 8 output columns. Returns the two bounds.
std::pair<int64_t, int64_t> GatherVector(const float* w, const int32_t* ids,
                                         int64_t cols, int64_t dim,
                                         float* out) {
  const int64_t jn = cols / kChunk * kChunk, dn = dim / 8 * 8;
  for (int64_t j0 = 0; j0 < jn; j0 += kChunk) {
    const float* rows[kChunk];
    for (int64_t j = 0; j < kChunk; ++j) rows[j] = w + ids[j0 + j] * dim;
    for (int64_t d = 0; d < dn; d += 8) {
      for (int64_t h = 0; h < kChunk; h += 8) {
        __m256 r[8];
        for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(rows[h + k] + d);
        Transpose8(r);
        for (int k = 0; k < 8; ++k) {
          _mm256_storeu_ps(out + (d + k) * cols + j0 + h, r[k]);
        }
      }
    }
  }
  return {jn, dn};
}

// The scatter-add over the same region, the other way round. Columns are
// added in order, so repeated ids sum as the scalar loop sums them.
std::pair<int64_t, int64_t> ScatterVector(const float* g, const int32_t* ids,
                                          int64_t cols, int64_t dim,
                                          float* gw) {
  const int64_t jn = cols / kChunk * kChunk, dn = dim / 8 * 8;
  for (int64_t j0 = 0; j0 < jn; j0 += kChunk) {
    float* rows[kChunk];
    for (int64_t j = 0; j < kChunk; ++j) rows[j] = gw + ids[j0 + j] * dim;
    for (int64_t d = 0; d < dn; d += 8) {
      for (int64_t h = 0; h < kChunk; h += 8) {
        __m256 r[8];
        for (int k = 0; k < 8; ++k) {
          r[k] = _mm256_loadu_ps(g + (d + k) * cols + j0 + h);
        }
        Transpose8(r);
        for (int k = 0; k < 8; ++k) {
          float* p = rows[h + k] + d;
          _mm256_storeu_ps(p, _mm256_add_ps(_mm256_loadu_ps(p), r[k]));
        }
      }
    }
  }
  return {jn, dn};
}
#endif  // __AVX2__

// out {D, cols} from the weight rows of `ids`.
template <typename T>
void Gather(const T* w, const int32_t* ids, int64_t cols, int64_t dim, T* out) {
  int64_t jn = 0, dn = 0;
#ifdef __AVX2__
  if constexpr (std::is_same_v<T, float>) {
    std::tie(jn, dn) = GatherVector(w, ids, cols, dim, out);
  }
#endif
  GatherScalar(w, ids, cols, dim, jn, cols, 0, dn, out);
  GatherScalar(w, ids, cols, dim, 0, cols, dn, dim, out);
}

template <typename T>
void Scatter(const T* g, const int32_t* ids, int64_t cols, int64_t dim, T* gw) {
  int64_t jn = 0, dn = 0;
#ifdef __AVX2__
  if constexpr (std::is_same_v<T, float>) {
    std::tie(jn, dn) = ScatterVector(g, ids, cols, dim, gw);
  }
#endif
  ScatterScalar(g, ids, cols, dim, jn, cols, 0, dn, gw);
  ScatterScalar(g, ids, cols, dim, 0, cols, dn, dim, gw);
}

// dst[c * rows + r] = src[r * cols + c]: {rows, cols} -> {cols, rows}.
template <typename T>
void Transpose(const T* src, int64_t rows, int64_t cols, T* dst) {
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t rn = std::min(kTile, rows - r0);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t cn = std::min(kTile, cols - c0);
      for (int64_t c = c0; c < c0 + cn; ++c) {
        for (int64_t r = r0; r < r0 + rn; ++r)
          dst[c * rows + r] = src[r * cols + c];
      }
    }
  }
}

}  // namespace

// --- Embedding ---

template <typename T>
Embedding<T>::Embedding(int64_t vocab_size, int64_t dim)
    : vocab_(vocab_size), dim_(dim) {}

template <typename T>
std::string Embedding<T>::Name() const {
  return absl::StrCat("embedding(", vocab_, ", ", dim_, ")");
}

template <typename T>
absl::StatusOr<Shape> Embedding<T>::Configure(const Shape& in) {
  if (vocab_ <= 0 || dim_ <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": vocab_size and dim must be positive, got ",
                     vocab_, " and ", dim_));
  }
  if (in.size() != 2 || in[0] != 1 || in[1] <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": expects token ids {1, L} but got ", ShapeString(in),
        "; an embedding must be the model's first layer, fed by a TOKENS "
        "data set"));
  }
  length_ = in[1];
  return Shape{dim_, length_};
}

template <typename T>
std::vector<ParamDecl> Embedding<T>::Params() const {
  ParamDecl w{"weight", {vocab_, dim_}, ParamDecl::Init::kNormal, dim_};
  w.std = 0.02;
  return {w};
}

template <typename T>
void Embedding<T>::Bind(std::vector<BasicTensor<T>> values,
                        std::vector<BasicTensor<T>> grads) {
  CHECK(values.size() == 1 && grads.size() == 1) << Name() << ": Bind";
  weight_ = std::move(values[0]);
  grad_weight_ = std::move(grads[0]);
}

template <typename T>
void Embedding<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                           Mode mode) {
  CHECK(in.rank() == 3 && in.dim(0) == 1 && in.dim(2) == length_)
      << Name() << ": input " << ShapeString(in.shape());
  const int64_t n = in.dim(1), cols = n * length_;
  ids_.resize(cols);
  for (int64_t j = 0; j < cols; ++j) {
    const T v = in[j];
    const int32_t id = static_cast<int32_t>(v);
    CHECK(v >= 0 && v < static_cast<T>(vocab_) && static_cast<T>(id) == v)
        << Name() << ": token id " << v << " at column " << j
        << " is not an integer in [0, " << vocab_ << ")";
    ids_[j] = id;
  }
  EnsureShape(out, dim_, n, length_);
  Gather(weight_.data(), ids_.data(), cols, dim_, out->data());
  (void)mode;  // the ids are kept either way; Backward needs them
}

template <typename T>
void Embedding<T>::Backward(const BasicTensor<T>& grad_out,
                            BasicTensor<T>* grad_in) {
  const int64_t cols = static_cast<int64_t>(ids_.size());
  CHECK(cols > 0) << Name() << ": Backward without a Forward";
  CHECK(grad_out.rank() == 3 && grad_out.dim(0) == dim_ &&
        grad_out.dim(1) * grad_out.dim(2) == cols)
      << Name() << ": output gradient " << ShapeString(grad_out.shape());
  T* gw = grad_weight_.data();
  if (!accumulate_) std::fill(gw, gw + vocab_ * dim_, T(0));
  Scatter(grad_out.data(), ids_.data(), cols, dim_, gw);
  if (grad_in != nullptr) {
    EnsureShape(grad_in, 1, grad_out.dim(1), grad_out.dim(2));
    std::fill(grad_in->data(), grad_in->data() + grad_in->size(), T(0));
  }
}

// --- PositionalEmbedding ---

template <typename T>
std::string PositionalEmbedding<T>::Name() const {
  return absl::StrCat("positional_embedding(",
                      dim_ > 0 ? absl::StrCat(dim_, ", ", length_) : "?", ")");
}

template <typename T>
absl::StatusOr<Shape> PositionalEmbedding<T>::Configure(const Shape& in) {
  if (in.size() != 2 || in[0] <= 0 || in[1] <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": expects a sequence {D, L} but got ",
                     ShapeString(in), "; put an embedding before it"));
  }
  dim_ = in[0];
  length_ = in[1];
  return in;
}

template <typename T>
std::vector<ParamDecl> PositionalEmbedding<T>::Params() const {
  CHECK_GT(dim_, 0) << Name() << ": Params() before Configure()";
  ParamDecl w{"weight", {length_, dim_}, ParamDecl::Init::kNormal, dim_};
  w.std = 0.02;
  return {w};
}

template <typename T>
void PositionalEmbedding<T>::Bind(std::vector<BasicTensor<T>> values,
                                  std::vector<BasicTensor<T>> grads) {
  CHECK(values.size() == 1 && grads.size() == 1) << Name() << ": Bind";
  weight_ = std::move(values[0]);
  grad_weight_ = std::move(grads[0]);
}

template <typename T>
void PositionalEmbedding<T>::Forward(const BasicTensor<T>& in,
                                     BasicTensor<T>* out, Mode mode) {
  CHECK(in.rank() == 3 && in.dim(0) == dim_ && in.dim(2) == length_)
      << Name() << ": input " << ShapeString(in.shape());
  const int64_t n = in.dim(1), L = length_;
  scratch_.resize(dim_ * L);
  Transpose(weight_.data(), L, dim_, scratch_.data());
  EnsureShape(out, dim_, n, L);
  const T* x = in.data();
  T* o = out->data();
  ParallelItems(dim_, ItemGrain(n * L), [&](int64_t d0, int64_t d1) {
    for (int64_t d = d0; d < d1; ++d) {
      const T* p = scratch_.data() + d * L;
      for (int64_t s = 0; s < n; ++s) {
        const int64_t base = (d * n + s) * L;
        for (int64_t t = 0; t < L; ++t) o[base + t] = x[base + t] + p[t];
      }
    }
  });
  (void)mode;
}

template <typename T>
void PositionalEmbedding<T>::Backward(const BasicTensor<T>& grad_out,
                                      BasicTensor<T>* grad_in) {
  CHECK(grad_out.rank() == 3 && grad_out.dim(0) == dim_ &&
        grad_out.dim(2) == length_)
      << Name() << ": output gradient " << ShapeString(grad_out.shape());
  const int64_t n = grad_out.dim(1), L = length_;
  const T* g = grad_out.data();
  // Sum over the batch into {D, L}, then turn it into the weight's {L, D}.
  // Each feature sums its samples in order: the same bits on any team.
  scratch_.assign(dim_ * L, T(0));
  if (grad_in != nullptr) EnsureShape(grad_in, dim_, n, L);
  ParallelItems(dim_, ItemGrain(n * L), [&](int64_t d0, int64_t d1) {
    for (int64_t d = d0; d < d1; ++d) {
      T* p = scratch_.data() + d * L;
      for (int64_t s = 0; s < n; ++s) {
        const T* row = g + (d * n + s) * L;
        for (int64_t t = 0; t < L; ++t) p[t] += row[t];
      }
    }
    if (grad_in != nullptr) {
      std::memcpy(grad_in->data() + d0 * n * L, g + d0 * n * L,
                  sizeof(T) * (d1 - d0) * n * L);
    }
  });
  Transpose(scratch_.data(), dim_, L, grad_weight_.data());
}

template class Embedding<float>;
template class Embedding<double>;
template class PositionalEmbedding<float>;
template class PositionalEmbedding<double>;

}  // namespace cohort

#include "worker/layers/embedding.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace cohort {
namespace {

// Tile edge of the gather/scatter transposes: a tile of kTile weight rows
// by kTile features (4 KiB of float) stays in L1 while it is turned around.
constexpr int64_t kTile = 32;

// Resizes `t` to {a, b, c} unless it already has that shape: building a
// Shape allocates, and this runs every step.
template <typename T>
void EnsureShape(BasicTensor<T>* t, int64_t a, int64_t b, int64_t c) {
  if (t->rank() != 3 || t->dim(0) != a || t->dim(1) != b || t->dim(2) != c) {
    t->Resize({a, b, c});
  }
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
  w.no_decay = true;
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
  const T* w = weight_.data();
  T* o = out->data();
  const T* rows[kTile];
  for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
    const int64_t jn = std::min(kTile, cols - j0);
    for (int64_t j = 0; j < jn; ++j) rows[j] = w + ids_[j0 + j] * dim_;
    for (int64_t d0 = 0; d0 < dim_; d0 += kTile) {
      const int64_t dn = std::min(kTile, dim_ - d0);
      for (int64_t d = d0; d < d0 + dn; ++d) {
        T* dst = o + d * cols + j0;
        for (int64_t j = 0; j < jn; ++j) dst[j] = rows[j][d];
      }
    }
  }
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
  const T* g = grad_out.data();
  // Columns in order, so repeated ids sum in the same order every run.
  for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
    const int64_t jn = std::min(kTile, cols - j0);
    for (int64_t d0 = 0; d0 < dim_; d0 += kTile) {
      const int64_t dn = std::min(kTile, dim_ - d0);
      for (int64_t j = j0; j < j0 + jn; ++j) {
        T* row = gw + ids_[j] * dim_;
        for (int64_t d = d0; d < d0 + dn; ++d) row[d] += g[d * cols + j];
      }
    }
  }
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
  w.no_decay = true;
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
  for (int64_t d = 0; d < dim_; ++d) {
    const T* p = scratch_.data() + d * L;
    for (int64_t s = 0; s < n; ++s) {
      const int64_t base = (d * n + s) * L;
      for (int64_t t = 0; t < L; ++t) o[base + t] = x[base + t] + p[t];
    }
  }
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
  scratch_.assign(dim_ * L, T(0));
  for (int64_t d = 0; d < dim_; ++d) {
    T* p = scratch_.data() + d * L;
    for (int64_t s = 0; s < n; ++s) {
      const T* row = g + (d * n + s) * L;
      for (int64_t t = 0; t < L; ++t) p[t] += row[t];
    }
  }
  Transpose(scratch_.data(), dim_, L, grad_weight_.data());
  if (grad_in != nullptr) {
    EnsureShape(grad_in, dim_, n, L);
    std::memcpy(grad_in->data(), g, sizeof(T) * grad_out.size());
  }
}

template class Embedding<float>;
template class Embedding<double>;
template class PositionalEmbedding<float>;
template class PositionalEmbedding<double>;

}  // namespace cohort

#include "worker/layers/interaction.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"
#include "kernels/parallel.h"

namespace cohort {
namespace {

// Samples per range on the compute threads: a sample's pairs are a few
// thousand multiply-adds.
constexpr int64_t kSampleGrain = 64;

template <typename T>
T Dot(const T* a, const T* b, int64_t n) {
  T s = 0;
  for (int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// One sample: out = [v_0, dot(v_i, v_j) for i = 1..T, j < i].
template <typename T>
void DotForward(const T* v, int64_t vectors, int64_t dim, T* out) {
  std::copy(v, v + dim, out);
  T* pair = out + dim;
  for (int64_t i = 1; i < vectors; ++i) {
    for (int64_t j = 0; j < i; ++j) {
      *pair++ = Dot(v + i * dim, v + j * dim, dim);
    }
  }
}

// One sample's input gradient: dv_0 starts from the output gradient of the
// copied v_0, every other dv_k from zero; pair (i, j) with gradient g adds
// g v_j to dv_i and g v_i to dv_j.
template <typename T>
void DotBackward(const T* v, const T* g, int64_t vectors, int64_t dim, T* dv) {
  std::copy(g, g + dim, dv);
  std::fill(dv + dim, dv + vectors * dim, T(0));
  const T* pair = g + dim;
  for (int64_t i = 1; i < vectors; ++i) {
    T* di = dv + i * dim;
    const T* vi = v + i * dim;
    for (int64_t j = 0; j < i; ++j) {
      const T gij = *pair++;
      T* dj = dv + j * dim;
      const T* vj = v + j * dim;
      for (int64_t d = 0; d < dim; ++d) {
        di[d] += gij * vj[d];
        dj[d] += gij * vi[d];
      }
    }
  }
}

}  // namespace

template <typename T>
std::string Interaction<T>::Name() const {
  return absl::StrCat(
      "interaction(", kind_ == InteractionKind::kDot ? "dot" : "cat", ", ",
      vectors_ > 0 ? absl::StrCat(vectors_) : "?", " x ", dim_, ")");
}

template <typename T>
absl::StatusOr<Shape> Interaction<T>::Configure(const Shape& in) {
  if (dim_ <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": dim must be positive, got ", dim_));
  }
  if (in.size() != 1 || in[0] <= 0 || in[0] % dim_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": expects a flat input of 1 + T vectors of dim ", dim_,
        " features ({dim (1 + T)}) but got ", ShapeString(in)));
  }
  vectors_ = in[0] / dim_;
  out_features_ = kind_ == InteractionKind::kCat
                      ? in[0]
                      : dim_ + vectors_ * (vectors_ - 1) / 2;
  return Shape{out_features_};
}

template <typename T>
void Interaction<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                             Mode mode) {
  const int64_t features = vectors_ * dim_;
  CHECK(in.rank() == 2 && in.dim(1) == features)
      << Name() << ": input " << ShapeString(in.shape());
  const int64_t n = in.dim(0);
  in_ = &in;
  EnsureShape(out, {n, out_features_});
  if (kind_ == InteractionKind::kCat) {
    std::copy(in.data(), in.data() + in.size(), out->data());
    return;
  }
  const T* x = in.data();
  T* y = out->data();
  ParallelRanges(n, kSampleGrain, [&](int64_t a, int64_t b) {
    for (int64_t s = a; s < b; ++s) {
      DotForward(x + s * features, vectors_, dim_, y + s * out_features_);
    }
  });
  (void)mode;
}

template <typename T>
void Interaction<T>::Backward(const BasicTensor<T>& grad_out,
                              BasicTensor<T>* grad_in) {
  CHECK(in_ != nullptr) << Name() << ": Backward without a Forward";
  const int64_t n = in_->dim(0), features = vectors_ * dim_;
  CHECK(grad_out.rank() == 2 && grad_out.dim(0) == n &&
        grad_out.dim(1) == out_features_)
      << Name() << ": output gradient " << ShapeString(grad_out.shape());
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, {n, features});
  if (kind_ == InteractionKind::kCat) {
    std::copy(grad_out.data(), grad_out.data() + grad_out.size(),
              grad_in->data());
    return;
  }
  const T* x = in_->data();
  const T* g = grad_out.data();
  T* dx = grad_in->data();
  ParallelRanges(n, kSampleGrain, [&](int64_t a, int64_t b) {
    for (int64_t s = a; s < b; ++s) {
      DotBackward(x + s * features, g + s * out_features_, vectors_, dim_,
                  dx + s * features);
    }
  });
}

template class Interaction<float>;
template class Interaction<double>;

}  // namespace cohort

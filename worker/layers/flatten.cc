#include "worker/layers/flatten.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"

namespace cohort {
namespace {

// Moves `n` blocks of `p` contiguous elements between the {C, N, P} and
// {N, C, P} orders; forward and backward are the same copy with the roles
// of the two orders swapped.
template <typename T>
void SwapOuterDims(const T* src, int64_t c, int64_t n, int64_t p, T* dst,
                   bool to_batch_major) {
  for (int64_t ci = 0; ci < c; ++ci) {
    for (int64_t ni = 0; ni < n; ++ni) {
      const int64_t channel_major = (ci * n + ni) * p;
      const int64_t batch_major = (ni * c + ci) * p;
      const T* from = src + (to_batch_major ? channel_major : batch_major);
      T* to = dst + (to_batch_major ? batch_major : channel_major);
      std::copy(from, from + p, to);
    }
  }
}

}  // namespace

template <typename T>
absl::StatusOr<Shape> Flatten<T>::Configure(const Shape& in) {
  if (in.empty() || in.size() > 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flatten: expected a per-sample input of shape [F], [C, L] or "
        "[C, H, W], got ",
        ShapeString(in)));
  }
  return Shape{NumElements(in)};
}

template <typename T>
void Flatten<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                         Mode mode) {
  in_shape_ = in.shape();  // reuses its capacity: no allocation per step
  if (in.rank() == 2) {
    EnsureShape(out, in.shape());
    std::copy(in.data(), in.data() + in.size(), out->data());
    return;
  }
  CHECK(in.rank() == 3 || in.rank() == 4)
      << "flatten: input " << ShapeString(in.shape());
  const int64_t c = in.dim(0), n = in.dim(1);
  const int64_t p = in.size() / std::max<int64_t>(c * n, 1);
  EnsureShape(out, {n, c * p});
  SwapOuterDims(in.data(), c, n, p, out->data(), /*to_batch_major=*/true);
}

template <typename T>
void Flatten<T>::Backward(const BasicTensor<T>& grad_out,
                          BasicTensor<T>* grad_in) {
  CHECK_EQ(grad_out.size(), NumElements(in_shape_));
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, in_shape_);
  if (in_shape_.size() == 2) {
    std::copy(grad_out.data(), grad_out.data() + grad_out.size(),
              grad_in->data());
    return;
  }
  const int64_t c = in_shape_[0], n = in_shape_[1];
  const int64_t p = grad_out.size() / std::max<int64_t>(c * n, 1);
  SwapOuterDims(grad_out.data(), c, n, p, grad_in->data(),
                /*to_batch_major=*/false);
}

template class Flatten<float>;
template class Flatten<double>;

}  // namespace cohort

#include "worker/layers/pool1d.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"

namespace cohort {

template <typename T>
Pool1d<T>::Pool1d(bool max, PoolOptions o) : max_(max), options_(o) {
  if (options_.stride == 0) options_.stride = options_.kernel;
}

template <typename T>
std::string Pool1d<T>::Name() const {
  return absl::StrCat(max_ ? "maxpool1d" : "avgpool1d", "(k", options_.kernel,
                      ", s", options_.stride, ", p", options_.padding, ")");
}

template <typename T>
absl::StatusOr<Shape> Pool1d<T>::Configure(const Shape& in) {
  const PoolOptions& o = options_;
  auto error = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(Name(), ": ", parts...));
  };
  if (o.kernel < 1) return error("kernel must be at least 1, got ", o.kernel);
  if (o.stride < 1) return error("stride must be at least 1, got ", o.stride);
  if (o.padding < 0 || 2 * o.padding > o.kernel) {
    return error("padding must be in [0, kernel / 2], got ", o.padding);
  }
  if (in.size() != 2) {
    return error("expected a per-sample input of shape [C, L], got ",
                 ShapeString(in));
  }
  const int64_t l = in[1] + 2 * o.padding;
  if (l < o.kernel) {
    return error("the kernel does not fit the padded input ", l, " of ",
                 ShapeString(in));
  }
  if (in[1] > std::numeric_limits<int32_t>::max()) {
    return error("an input row of ", ShapeString(in),
                 " is too long for int32 indices");
  }
  channels_ = in[0];
  geometry_.in_l = in[1];
  geometry_.out_l = (l - o.kernel) / o.stride + 1;
  geometry_.kernel = o.kernel;
  geometry_.stride = o.stride;
  geometry_.padding = o.padding;
  return Shape{channels_, geometry_.out_l};
}

template <typename T>
void Pool1d<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                        Mode mode) {
  CHECK(in.rank() == 3 && in.dim(0) == channels_ && in.dim(2) == geometry_.in_l)
      << Name() << ": input " << ShapeString(in.shape())
      << " does not match the configured per-sample shape";
  batch_ = in.dim(1);
  geometry_.planes = channels_ * batch_;
  EnsureShape(out, {channels_, batch_, geometry_.out_l});
  if (max_) {
    argmax_.resize(out->size());
    MaxPool1dForward(geometry_, in.data(), out->data(), argmax_.data());
  } else {
    AvgPool1dForward(geometry_, in.data(), out->data());
  }
}

template <typename T>
void Pool1d<T>::Backward(const BasicTensor<T>& grad_out,
                         BasicTensor<T>* grad_in) {
  const Pool1dGeometry& g = geometry_;
  CHECK_EQ(grad_out.size(), g.planes * g.out_l);
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, {channels_, batch_, g.in_l});
  if (max_) {
    MaxPool1dBackward(g, grad_out.data(), argmax_.data(), grad_in->data());
  } else {
    AvgPool1dBackward(g, grad_out.data(), grad_in->data());
  }
}

template class Pool1d<float>;
template class Pool1d<double>;

}  // namespace cohort

#include "worker/layers/pool.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"
#include "kernels/parallel.h"

namespace cohort {

template <typename T>
Pool2dBase<T>::Pool2dBase(const char* kind, PoolOptions o)
    : kind_(kind), options_(o) {
  if (options_.stride == 0) options_.stride = options_.kernel;
}

template <typename T>
std::string Pool2dBase<T>::Name() const {
  return absl::StrCat(kind_, "(k", options_.kernel, ", s", options_.stride,
                      ", p", options_.padding, ")");
}

template <typename T>
absl::StatusOr<Shape> Pool2dBase<T>::Configure(const Shape& in) {
  const PoolOptions& o = options_;
  auto error = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(Name(), ": ", parts...));
  };
  if (o.kernel < 1) return error("kernel must be at least 1, got ", o.kernel);
  if (o.stride < 1) return error("stride must be at least 1, got ", o.stride);
  if (o.padding < 0 || 2 * o.padding > o.kernel) {
    return error("padding must be in [0, kernel / 2], got ", o.padding);
  }
  if (in.size() != 3) {
    return error("expected a per-sample input of shape [C, H, W], got ",
                 ShapeString(in));
  }
  const int64_t h = in[1] + 2 * o.padding, w = in[2] + 2 * o.padding;
  if (h < o.kernel || w < o.kernel) {
    return error("the kernel does not fit the padded input ", h, "x", w, " of ",
                 ShapeString(in));
  }
  if (in[1] * in[2] > std::numeric_limits<int32_t>::max()) {
    return error("an input plane of ", ShapeString(in),
                 " is too large for int32 indices");
  }
  channels_ = in[0];
  geometry_.in_h = in[1];
  geometry_.in_w = in[2];
  geometry_.out_h = (h - o.kernel) / o.stride + 1;
  geometry_.out_w = (w - o.kernel) / o.stride + 1;
  geometry_.kernel = o.kernel;
  geometry_.stride = o.stride;
  geometry_.padding = o.padding;
  return Shape{channels_, geometry_.out_h, geometry_.out_w};
}

template <typename T>
const Pool2dGeometry& Pool2dBase<T>::GeometryFor(const BasicTensor<T>& in) {
  CHECK(in.rank() == 4 && in.dim(0) == channels_ &&
        in.dim(2) == geometry_.in_h && in.dim(3) == geometry_.in_w)
      << Name() << ": input " << ShapeString(in.shape())
      << " does not match the configured per-sample shape";
  batch_ = in.dim(1);
  geometry_.planes = channels_ * batch_;
  return geometry_;
}

namespace {

// Runs body(planes, first plane) over ranges of g's planes on the compute
// threads; planes are independent, so the result is the same at any count.
template <typename Body>
void OverPlanes(const Pool2dGeometry& g, const Body& body) {
  const int64_t per_plane = g.in_h * g.in_w;
  ParallelItems(g.planes, ItemGrain(per_plane),
                [&](int64_t first, int64_t last) {
                  Pool2dGeometry part = g;
                  part.planes = last - first;
                  body(part, first);
                });
}

}  // namespace

template <typename T>
void MaxPool2d<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                           Mode mode) {
  const Pool2dGeometry& g = this->GeometryFor(in);
  EnsureShape(out, {this->channels_, this->batch_, g.out_h, g.out_w});
  argmax_.resize(out->size());
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  OverPlanes(g, [&](const Pool2dGeometry& part, int64_t p) {
    MaxPool2dForward(part, in.data() + p * in_plane,
                     out->data() + p * out_plane,
                     argmax_.data() + p * out_plane);
  });
}

template <typename T>
void MaxPool2d<T>::Backward(const BasicTensor<T>& grad_out,
                            BasicTensor<T>* grad_in) {
  const Pool2dGeometry& g = this->geometry_;
  CHECK_EQ(grad_out.size(), static_cast<int64_t>(argmax_.size()));
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, {this->channels_, this->batch_, g.in_h, g.in_w});
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  OverPlanes(g, [&](const Pool2dGeometry& part, int64_t p) {
    MaxPool2dBackward(part, grad_out.data() + p * out_plane,
                      argmax_.data() + p * out_plane,
                      grad_in->data() + p * in_plane);
  });
}

template <typename T>
void AvgPool2d<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                           Mode mode) {
  const Pool2dGeometry& g = this->GeometryFor(in);
  EnsureShape(out, {this->channels_, this->batch_, g.out_h, g.out_w});
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  OverPlanes(g, [&](const Pool2dGeometry& part, int64_t p) {
    AvgPool2dForward(part, in.data() + p * in_plane,
                     out->data() + p * out_plane);
  });
}

template <typename T>
void AvgPool2d<T>::Backward(const BasicTensor<T>& grad_out,
                            BasicTensor<T>* grad_in) {
  const Pool2dGeometry& g = this->geometry_;
  CHECK_EQ(grad_out.size(), g.planes * g.out_h * g.out_w);
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, {this->channels_, this->batch_, g.in_h, g.in_w});
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  OverPlanes(g, [&](const Pool2dGeometry& part, int64_t p) {
    AvgPool2dBackward(part, grad_out.data() + p * out_plane,
                      grad_in->data() + p * in_plane);
  });
}

template <typename T>
absl::StatusOr<Shape> GlobalAvgPool<T>::Configure(const Shape& in) {
  if ((in.size() != 2 && in.size() != 3) || NumElements(in) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(),
        ": expected a non-empty per-sample input of shape [C, H, W] "
        "or [C, L], got ",
        ShapeString(in)));
  }
  plane_ = NumElements(in) / in[0];
  return Shape{in[0]};
}

template <typename T>
void GlobalAvgPool<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                               Mode mode) {
  CHECK((in.rank() == 3 || in.rank() == 4) &&
        in.size() == in.dim(0) * in.dim(1) * plane_)
      << Name() << ": input " << ShapeString(in.shape())
      << " does not match the configured per-sample shape";
  in_shape_ = in.shape();  // reuses its capacity: no allocation per step
  const int64_t c = in.dim(0), n = in.dim(1);
  EnsureShape(out, {n, c});
  GlobalAvgPoolForward(c, n, plane_, in.data(), out->data());
}

template <typename T>
void GlobalAvgPool<T>::Backward(const BasicTensor<T>& grad_out,
                                BasicTensor<T>* grad_in) {
  const int64_t c = in_shape_[0], n = in_shape_[1];
  CHECK_EQ(grad_out.size(), c * n);
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, in_shape_);
  GlobalAvgPoolBackward(c, n, plane_, grad_out.data(), grad_in->data());
}

template class Pool2dBase<float>;
template class Pool2dBase<double>;
template class MaxPool2d<float>;
template class MaxPool2d<double>;
template class AvgPool2d<float>;
template class AvgPool2d<double>;
template class GlobalAvgPool<float>;
template class GlobalAvgPool<double>;

}  // namespace cohort

#include "kernels/softmax.h"

#include <algorithm>

#include "kernels/fast_exp.h"
#include "kernels/row_max.h"

namespace cohort {
namespace {

// Inner positions handled together: their running maxima and sums stay in
// a small stack buffer while the axis is walked.
constexpr int64_t kBlock = 256;

// y = softmax of one contiguous row of n; returns nothing, writes y.
template <typename T>
void RowForward(const T* x, T* y, int64_t n) {
  const T mx = RowMax(x, n);
  T sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    const T e = FastExp(x[j] - mx);
    y[j] = e;
    sum += e;
  }
  const T inv = T(1) / sum;
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
}

// The softmax along the axis (stride `stride`) of `width` adjacent inner
// positions starting at x.
template <typename T>
void ColumnsForward(const T* x, T* y, int64_t axis, int64_t stride,
                    int64_t width) {
  T mx[kBlock], sum[kBlock];
  std::copy(x, x + width, mx);
  for (int64_t a = 1; a < axis; ++a) {
    const T* row = x + a * stride;
    for (int64_t j = 0; j < width; ++j) mx[j] = row[j] > mx[j] ? row[j] : mx[j];
  }
  std::fill(sum, sum + width, T(0));
  for (int64_t a = 0; a < axis; ++a) {
    const T* row = x + a * stride;
    T* out = y + a * stride;
    for (int64_t j = 0; j < width; ++j) {
      const T e = FastExp(row[j] - mx[j]);
      out[j] = e;
      sum[j] += e;
    }
  }
  for (int64_t j = 0; j < width; ++j) sum[j] = T(1) / sum[j];
  for (int64_t a = 0; a < axis; ++a) {
    T* out = y + a * stride;
    for (int64_t j = 0; j < width; ++j) out[j] *= sum[j];
  }
}

// dx = y * (dy - sum(dy * y)) along one contiguous row; exp(x - max) goes
// into dx first, so each exp is computed once.
template <typename T>
void RowBackward(const T* x, const T* dy, T* dx, int64_t n) {
  const T mx = RowMax(x, n);
  T sum = 0, dot = 0;
  for (int64_t j = 0; j < n; ++j) {
    const T e = FastExp(x[j] - mx);
    dx[j] = e;
    sum += e;
    dot += dy[j] * e;
  }
  const T inv = T(1) / sum;
  dot *= inv;
  for (int64_t j = 0; j < n; ++j) dx[j] = dx[j] * inv * (dy[j] - dot);
}

template <typename T>
void ColumnsBackward(const T* x, const T* dy, T* dx, int64_t axis,
                     int64_t stride, int64_t width) {
  T mx[kBlock], inv[kBlock], dot[kBlock];
  std::copy(x, x + width, mx);
  for (int64_t a = 1; a < axis; ++a) {
    const T* row = x + a * stride;
    for (int64_t j = 0; j < width; ++j) mx[j] = row[j] > mx[j] ? row[j] : mx[j];
  }
  std::fill(inv, inv + width, T(0));
  std::fill(dot, dot + width, T(0));
  for (int64_t a = 0; a < axis; ++a) {
    const T* row = x + a * stride;
    const T* g = dy + a * stride;
    T* e = dx + a * stride;
    for (int64_t j = 0; j < width; ++j) {
      e[j] = FastExp(row[j] - mx[j]);
      inv[j] += e[j];
      dot[j] += g[j] * e[j];
    }
  }
  // dot holds sum(dy * e); divided by the sum it is sum(dy * y).
  for (int64_t j = 0; j < width; ++j) {
    inv[j] = T(1) / inv[j];
    dot[j] *= inv[j];
  }
  for (int64_t a = 0; a < axis; ++a) {
    const T* g = dy + a * stride;
    T* out = dx + a * stride;
    for (int64_t j = 0; j < width; ++j) {
      out[j] = out[j] * inv[j] * (g[j] - dot[j]);
    }
  }
}

}  // namespace

template <typename T>
void SoftmaxForward(const SoftmaxGeometry& g, const T* in, T* out) {
  const int64_t slab = g.axis * g.inner;
  for (int64_t o = 0; o < g.outer; ++o) {
    const T* x = in + o * slab;
    T* y = out + o * slab;
    if (g.inner == 1) {
      RowForward(x, y, g.axis);
      continue;
    }
    for (int64_t j = 0; j < g.inner; j += kBlock) {
      ColumnsForward(x + j, y + j, g.axis, g.inner,
                     std::min(kBlock, g.inner - j));
    }
  }
}

template <typename T>
void SoftmaxBackward(const SoftmaxGeometry& g, const T* in, const T* grad_out,
                     T* grad_in) {
  const int64_t slab = g.axis * g.inner;
  for (int64_t o = 0; o < g.outer; ++o) {
    const T* x = in + o * slab;
    const T* dy = grad_out + o * slab;
    T* dx = grad_in + o * slab;
    if (g.inner == 1) {
      RowBackward(x, dy, dx, g.axis);
      continue;
    }
    for (int64_t j = 0; j < g.inner; j += kBlock) {
      ColumnsBackward(x + j, dy + j, dx + j, g.axis, g.inner,
                      std::min(kBlock, g.inner - j));
    }
  }
}

#define COHORT_INSTANTIATE(T)                                                  \
  template void SoftmaxForward<T>(const SoftmaxGeometry&, const T*, T*);       \
  template void SoftmaxBackward<T>(const SoftmaxGeometry&, const T*, const T*, \
                                   T*);
COHORT_INSTANTIATE(float)
COHORT_INSTANTIATE(double)
#undef COHORT_INSTANTIATE

}  // namespace cohort

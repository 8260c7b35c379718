// The row kernels' gradients (conv_depthwise_rows.h): the weight gradient
// at stride 1 and 2 and the input gradient at stride 2, read in place from
// the input and output-gradient planes.
//
// The grid kernels (conv_depthwise.cc) first copy the input into a
// zero-bordered grid and place each plane of the output gradient on one,
// and at stride 2 compute every grid position, four times the outputs.
// On MobileNetV2's wide planes those copies, not the arithmetic, set the
// time: the weight gradient of a 96-channel 112x112 layer at stride 2 took
// five times its forward pass.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/conv_depthwise_rows.h"
#include "kernels/parallel.h"

namespace cohort {
namespace conv_internal {
namespace {

// Columns [1, hi) of a row's outputs read only columns inside the input
// row (the forward pass's Row splits the same way).
int64_t InteriorEnd(int64_t stride, int64_t width, int64_t out_w) {
  return std::min(out_w, width >= 2 ? (width - 2) / stride + 1 : 0);
}

// part[kw][o] += dy[o] * x[o * S + kw - 1] over interior outputs o, and
// edge[kw] the same over the others, columns outside the row skipped.
template <int S, typename T>
void WeightGradRow(const T* __restrict x, const T* __restrict dy, int64_t width,
                   int64_t out_w, int64_t hi, T* __restrict part, T* edge) {
  T* __restrict p0 = part;
  T* __restrict p1 = part + out_w;
  T* __restrict p2 = part + 2 * out_w;
  for (int64_t o = 1; o < hi; ++o) {
    const T d = dy[o];
    const int64_t i = o * S;
    p0[o] = std::fma(d, x[i - 1], p0[o]);
    p1[o] = std::fma(d, x[i], p1[o]);
    p2[o] = std::fma(d, x[i + 1], p2[o]);
  }
  auto edge_output = [&](int64_t o) {
    for (int kw = 0; kw < 3; ++kw) {
      const int64_t i = o * S + kw - 1;
      if (i >= 0 && i < width) edge[kw] = std::fma(dy[o], x[i], edge[kw]);
    }
  };
  if (out_w > 0) edge_output(0);
  for (int64_t o = std::max<int64_t>(hi, 1); o < out_w; ++o) edge_output(o);
}

// One (channel, sample) plane's share of the nine taps' gradients: tap
// (kh, kw) pairs output row r with input row r * S + kh - 1. `part` holds
// 9 rows of out_w partial sums, `edge` 9 more.
template <int S, typename T>
void WeightGradPlane(const ConvGeometry& g, const T* x, const T* dy, T* part,
                     T* edge) {
  const int64_t h = g.in_h, width = g.in_w, oh = g.out_h(), ow = g.out_w();
  const int64_t hi = InteriorEnd(S, width, ow);
  for (int64_t r = 0; r < oh; ++r) {
    for (int kh = 0; kh < 3; ++kh) {
      const int64_t ir = r * S + kh - 1;
      if (ir < 0 || ir >= h) continue;
      WeightGradRow<S>(x + ir * width, dy + r * ow, width, ow, hi,
                       part + kh * 3 * ow, edge + kh * 3);
    }
  }
}

template <int S, typename T>
void WeightGradAll(const ConvGeometry& g, const T* in, const T* grad_out,
                   T* grad_weight, ConvWorkspace<T>* ws) {
  const int64_t m = g.out_channels / g.in_channels;
  const int64_t ow = g.out_w(), in_plane = g.in_h * g.in_w;
  const int64_t out_plane = g.out_h() * ow;
  const int64_t slot_len = SlotLength<T>(9 * ow);
  BasicTensor<T>& scratch = ws->packed;
  if (scratch.rank() != 1 || scratch.size() < RangeSlots() * slot_len) {
    scratch.Resize({RangeSlots() * slot_len});
  }
  ParallelItems(g.out_channels, ItemGrain(g.batch * out_plane * 9),
                [&](int64_t oc0, int64_t oc1) {
                  T* part = scratch.data() + RangeSlot() * slot_len;
                  for (int64_t oc = oc0; oc < oc1; ++oc) {
                    std::fill(part, part + 9 * ow, T(0));
                    T edge[9] = {};
                    for (int64_t n = 0; n < g.batch; ++n) {
                      WeightGradPlane<S>(
                          g, in + ((oc / m) * g.batch + n) * in_plane,
                          grad_out + (oc * g.batch + n) * out_plane, part,
                          edge);
                    }
                    for (int t = 0; t < 9; ++t) {
                      T s = edge[t];
                      for (int64_t o = 0; o < ow; ++o) s += part[t * ow + o];
                      grad_weight[oc * 9 + t] = s;
                    }
                  }
                });
}

// Input row 2j (even) of a stride-2 layer is read by tap row 1 of output
// row j; row 2j + 1 by tap row 0 of output row j + 1 (when there is one)
// and tap row 2 of output row j. Columns likewise: 2i by tap column 1 of
// output i, 2i + 1 by column 0 of output i + 1 and column 2 of output i.
// Each input gradient sums its taps in tap order, each a fused multiply-
// add from 0, as the grid's correlation does (which adds exact zeros for
// the taps that read no output).
template <typename T>
struct GradRows {
  const T* dy[2];  // output-gradient rows, in tap-row order
  int kh[2];       // their tap rows
  int count;
};

template <typename T>
T EvenColumn(const GradRows<T>& r, const T* w, int64_t i) {
  T s = T(0);
  for (int k = 0; k < r.count; ++k)
    s = std::fma(w[r.kh[k] * 3 + 1], r.dy[k][i], s);
  return s;
}

template <typename T>
T OddColumn(const GradRows<T>& r, const T* w, int64_t i, int64_t out_w) {
  T s = T(0);
  for (int k = 0; k < r.count; ++k) {
    if (i + 1 < out_w) s = std::fma(w[r.kh[k] * 3], r.dy[k][i + 1], s);
    s = std::fma(w[r.kh[k] * 3 + 2], r.dy[k][i], s);
  }
  return s;
}

// One input row's gradient, `count` (1 or 2) rows fixed at compile time
// for the columns where every tap reads an output, which vectorize.
template <int kCount, typename T>
void InputGradRow(const GradRows<T>& r, const T* w, int64_t width,
                  int64_t out_w, T* __restrict dx) {
  // Columns 2i and 2i + 1 with i + 1 < out_w and 2i + 1 < width.
  const int64_t pairs = std::min(out_w - 1, (width - 1) / 2);
  const T* __restrict a = r.dy[0];
  const T* __restrict b = r.dy[kCount - 1];
  const int ka = r.kh[0] * 3, kb = r.kh[kCount - 1] * 3;
  const T a0 = w[ka], a1 = w[ka + 1], a2 = w[ka + 2];
  const T b0 = w[kb], b1 = w[kb + 1], b2 = w[kb + 2];
  for (int64_t i = 0; i < pairs; ++i) {
    T even = std::fma(a1, a[i], T(0));
    T odd = std::fma(a0, a[i + 1], T(0));
    odd = std::fma(a2, a[i], odd);
    if (kCount == 2) {
      even = std::fma(b1, b[i], even);
      odd = std::fma(b0, b[i + 1], odd);
      odd = std::fma(b2, b[i], odd);
    }
    dx[2 * i] = even;
    dx[2 * i + 1] = odd;
  }
  for (int64_t c = 2 * pairs; c < width; ++c) {
    dx[c] =
        c % 2 == 0 ? EvenColumn(r, w, c / 2) : OddColumn(r, w, c / 2, out_w);
  }
}

template <typename T>
void InputGradPlaneStride2(const ConvGeometry& g, const T* dy, const T* w,
                           T* dx) {
  const int64_t h = g.in_h, width = g.in_w, oh = g.out_h(), ow = g.out_w();
  for (int64_t ir = 0; ir < h; ++ir) {
    GradRows<T> r{};
    const int64_t j = ir / 2;
    if (ir % 2 == 0) {
      r = {{dy + j * ow, nullptr}, {1, 0}, 1};
    } else if (j + 1 < oh) {
      r = {{dy + (j + 1) * ow, dy + j * ow}, {0, 2}, 2};
    } else {
      r = {{dy + j * ow, nullptr}, {2, 0}, 1};
    }
    if (r.count == 2) {
      InputGradRow<2>(r, w, width, ow, dx + ir * width);
    } else {
      InputGradRow<1>(r, w, width, ow, dx + ir * width);
    }
  }
}

}  // namespace

template <typename T>
void DepthwiseRowsWeightGrad(const ConvGeometry& g, const T* in,
                             const T* grad_out, T* grad_weight,
                             ConvWorkspace<T>* ws) {
  if (g.stride == 1) {
    WeightGradAll<1>(g, in, grad_out, grad_weight, ws);
  } else {
    WeightGradAll<2>(g, in, grad_out, grad_weight, ws);
  }
}

template <typename T>
void DepthwiseRowsInputGradStride2(const ConvGeometry& g, const T* grad_out,
                                   const T* weight, T* grad_in) {
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h() * g.out_w();
  ParallelItems(g.in_channels, ItemGrain(g.batch * in_plane * 4),
                [&](int64_t c0, int64_t c1) {
                  for (int64_t c = c0; c < c1; ++c) {
                    for (int64_t n = 0; n < g.batch; ++n) {
                      InputGradPlaneStride2(
                          g, grad_out + (c * g.batch + n) * out_plane,
                          weight + c * 9,
                          grad_in + (c * g.batch + n) * in_plane);
                    }
                  }
                });
}

#define COHORT_INSTANTIATE_ROWS_GRAD(T)                                      \
  template void DepthwiseRowsWeightGrad<T>(const ConvGeometry&, const T*,    \
                                           const T*, T*, ConvWorkspace<T>*); \
  template void DepthwiseRowsInputGradStride2<T>(const ConvGeometry&,        \
                                                 const T*, const T*, T*);

COHORT_INSTANTIATE_ROWS_GRAD(float)
COHORT_INSTANTIATE_ROWS_GRAD(double)
#undef COHORT_INSTANTIATE_ROWS_GRAD

}  // namespace conv_internal
}  // namespace cohort

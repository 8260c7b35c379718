#include "kernels/conv_depthwise_rows.h"

#include <algorithm>
#include <cmath>

#include "kernels/parallel.h"

namespace cohort {
namespace conv_internal {
namespace {

// Input planes narrower than this run on the grid kernels.
constexpr int64_t kMinWidth = 32;

// The taps of one output row: rows[kh] is the input row tap row kh reads
// (a row of zeros above and below the plane); tap column kw of output o
// reads column o * S + kCol(kw).
template <typename T>
struct RowTaps {
  const T* rows[3];
  T w[9];
  T b;
};

// Column of tap kw relative to o * S: kw - 1, or 1 - kw with the taps
// mirrored (the input gradient reads the output gradient that way).
template <bool kMirror>
constexpr int64_t Col(int kw) {
  return kMirror ? 1 - kw : kw - 1;
}

// One output at o, columns outside [0, width) reading 0.
template <int S, bool kMirror, typename T>
T EdgeOutput(const RowTaps<T>& k, int64_t width, int64_t o) {
  T s = k.b;
  for (int kh = 0; kh < 3; ++kh) {
    for (int kw = 0; kw < 3; ++kw) {
      const int64_t i = o * S + Col<kMirror>(kw);
      const T v = i >= 0 && i < width ? k.rows[kh][i] : T(0);
      s = std::fma(k.w[kh * 3 + kw], v, s);
    }
  }
  return s;
}

// Outputs [0, out_w) of one row. Outputs 1 .. (width - 2) / S read only
// columns inside the row, and vectorize.
template <int S, bool kMirror, typename T>
void Row(const RowTaps<T>& k, int64_t width, int64_t out_w, T* y) {
  const int64_t hi = std::min(out_w, width >= 2 ? (width - 2) / S + 1 : 0);
  if (out_w > 0) y[0] = EdgeOutput<S, kMirror>(k, width, 0);
  const T* __restrict r0 = k.rows[0];
  const T* __restrict r1 = k.rows[1];
  const T* __restrict r2 = k.rows[2];
  const T w0 = k.w[0], w1 = k.w[1], w2 = k.w[2], w3 = k.w[3], w4 = k.w[4],
          w5 = k.w[5], w6 = k.w[6], w7 = k.w[7], w8 = k.w[8];
  constexpr int64_t a = Col<kMirror>(0), b = Col<kMirror>(1),
                    c = Col<kMirror>(2);
  for (int64_t o = 1; o < hi; ++o) {
    const int64_t i = o * S;
    T s = k.b;
    s = std::fma(w0, r0[i + a], s);
    s = std::fma(w1, r0[i + b], s);
    s = std::fma(w2, r0[i + c], s);
    s = std::fma(w3, r1[i + a], s);
    s = std::fma(w4, r1[i + b], s);
    s = std::fma(w5, r1[i + c], s);
    s = std::fma(w6, r2[i + a], s);
    s = std::fma(w7, r2[i + b], s);
    s = std::fma(w8, r2[i + c], s);
    y[o] = s;
  }
  for (int64_t o = std::max<int64_t>(hi, 1); o < out_w; ++o) {
    y[o] = EdgeOutput<S, kMirror>(k, width, o);
  }
}

// Every output row of one plane: x is the input plane (h x width), y the
// output plane (out_h x out_w); tap row kh of output row r reads input row
// r * S + kh - 1, or r + 1 - kh mirrored.
template <int S, bool kMirror, typename T>
void Plane(const T* x, int64_t h, int64_t width, const T* zeros, RowTaps<T> k,
           int64_t out_h, int64_t out_w, T* y) {
  for (int64_t r = 0; r < out_h; ++r) {
    for (int kh = 0; kh < 3; ++kh) {
      const int64_t ir = r * S + Col<kMirror>(kh);
      k.rows[kh] = ir >= 0 && ir < h ? x + ir * width : zeros;
    }
    Row<S, kMirror>(k, width, out_w, y + r * out_w);
  }
}

// A row of `width` zeros in the workspace's scratch (reused from step to
// step), which the rows above and below a plane read.
template <typename T>
const T* ZeroRow(int64_t width, ConvWorkspace<T>* ws) {
  BasicTensor<T>& z = ws->scratch;
  if (z.rank() != 1 || z.size() < width) z.Resize({width});
  std::fill(z.data(), z.data() + width, T(0));
  return z.data();
}

// Runs Plane over every (output channel, sample) of the layer, channels on
// the compute threads. `x` holds the planes read, channel oc reading
// channel oc / m; `w` and `b` the taps and biases (b may be null).
template <int S, bool kMirror, typename T>
void AllPlanes(const ConvGeometry& g, int64_t m, const T* x, const T* w,
               const T* b, T* y, ConvWorkspace<T>* ws) {
  const int64_t h = g.in_h, width = g.in_w, oh = g.out_h(), ow = g.out_w();
  const T* zeros = ZeroRow(width, ws);
  ParallelItems(g.out_channels, ItemGrain(g.batch * oh * ow * 9),
                [&](int64_t oc0, int64_t oc1) {
                  for (int64_t oc = oc0; oc < oc1; ++oc) {
                    RowTaps<T> k;
                    std::copy(w + oc * 9, w + oc * 9 + 9, k.w);
                    k.b = b != nullptr ? b[oc] : T(0);
                    for (int64_t n = 0; n < g.batch; ++n) {
                      Plane<S, kMirror>(
                          x + ((oc / m) * g.batch + n) * h * width, h, width,
                          zeros, k, oh, ow, y + (oc * g.batch + n) * oh * ow);
                    }
                  }
                });
}

}  // namespace

bool DepthwiseRowsForwardApplies(const ConvGeometry& g) {
  return g.depthwise() && g.kernel_h == 3 && g.kernel_w == 3 && g.pad_h == 1 &&
         g.pad_w == 1 && g.dilation == 1 && (g.stride == 1 || g.stride == 2) &&
         g.in_w >= kMinWidth;
}

bool DepthwiseRowsInputGradApplies(const ConvGeometry& g) {
  return DepthwiseRowsForwardApplies(g) && g.out_channels == g.in_channels;
}

template <typename T>
void DepthwiseRowsForward(const ConvGeometry& g, const T* in, const T* weight,
                          const T* bias, T* out, ConvWorkspace<T>* ws) {
  const int64_t m = g.out_channels / g.in_channels;
  if (g.stride == 1) {
    AllPlanes<1, false>(g, m, in, weight, bias, out, ws);
  } else {
    AllPlanes<2, false>(g, m, in, weight, bias, out, ws);
  }
}

// At stride 1 and padding 1, input position (r, c) receives w[kh][kw] *
// dy[r + 1 - kh][c + 1 - kw]: the forward pass over dy, taps mirrored and
// in the grid kernel's order.
template <typename T>
void DepthwiseRowsInputGrad(const ConvGeometry& g, const T* grad_out,
                            const T* weight, T* grad_in, ConvWorkspace<T>* ws) {
  if (g.stride == 2) {
    DepthwiseRowsInputGradStride2(g, grad_out, weight, grad_in);
    return;
  }
  AllPlanes<1, true>(g, 1, grad_out, weight, static_cast<const T*>(nullptr),
                     grad_in, ws);
}

template void DepthwiseRowsForward<float>(const ConvGeometry&, const float*,
                                          const float*, const float*, float*,
                                          ConvWorkspace<float>*);
template void DepthwiseRowsForward<double>(const ConvGeometry&, const double*,
                                           const double*, const double*,
                                           double*, ConvWorkspace<double>*);
template void DepthwiseRowsInputGrad<float>(const ConvGeometry&, const float*,
                                            const float*, float*,
                                            ConvWorkspace<float>*);
template void DepthwiseRowsInputGrad<double>(const ConvGeometry&, const double*,
                                             const double*, double*,
                                             ConvWorkspace<double>*);

}  // namespace conv_internal
}  // namespace cohort

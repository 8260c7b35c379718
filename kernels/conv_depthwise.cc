#include "kernels/conv_depthwise.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/logging.h"
#include "kernels/conv_depthwise_rows.h"
#include "kernels/parallel.h"

namespace cohort {
namespace conv_internal {
namespace {

// Grid positions a block of samples covers: sized so that a block's grid
// and its shifted input stay in the L1/L2 caches while every tap runs.
constexpr int64_t kBlockPositions = 4096;

template <typename T>
void Grow(BasicTensor<T>* t, int64_t n) {
  if (t->rank() != 1 || t->size() < n) t->Resize({n});
}

// The padded grid of one layer's input: planes of Hp x Wp per sample.
struct Grid {
  explicit Grid(const ConvGeometry& g)
      : hp(g.in_h + 2 * g.pad_h),
        wp(g.in_w + 2 * g.pad_w),
        plane(hp * wp),
        oh(g.out_h()),
        ow(g.out_w()),
        // The grid positions of one sample up to its last output.
        span((oh - 1) * g.stride * wp + (ow - 1) * g.stride + 1),
        per_block(std::max<int64_t>(1, kBlockPositions / plane)) {
    for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
      for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
        taps.push_back(kh * g.dilation * wp + kw * g.dilation);
      }
    }
  }
  // Grid positions computed for a block of `n` samples.
  int64_t Length(int64_t n) const { return (n - 1) * plane + span; }

  int64_t hp, wp, plane, oh, ow, span, per_block;
  std::vector<int64_t> taps;
};

// y[i] += a * x[i]: the compiler vectorizes it (-O3, see BUILD).
template <typename T>
inline void Axpy(int64_t n, T a, const T* __restrict x, T* __restrict y) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// Four lanes of accumulators per vector register: the sum reassociated
// explicitly so that it vectorizes without -ffast-math.
template <typename T>
inline T Dot(int64_t n, const T* __restrict a, const T* __restrict b) {
  constexpr int kLanes = 64 / sizeof(T);
  T acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
  }
  T sum = 0;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (int j = 0; j < kLanes; ++j) sum += acc[j];
  return sum;
}

// y[i] = b + sum_t w[t] * x[i + off[t]] for i < n, all taps in one pass
// (each output loaded and stored once): the tap count fixed at compile
// time, so that the loop over i vectorizes with the taps unrolled.
template <int kTaps, typename T>
void FusedTaps(int64_t n, const T* w, const int64_t* off, T b,
               const T* __restrict x, T* __restrict y) {
  T wt[kTaps];
  const T* xt[kTaps];
  for (int t = 0; t < kTaps; ++t) {
    wt[t] = w[t];
    xt[t] = x + off[t];
  }
  for (int64_t i = 0; i < n; ++i) {
    T s = b;
    for (int t = 0; t < kTaps; ++t) s += wt[t] * xt[t][i];
    y[i] = s;
  }
}

// FusedTaps for any tap count: the common kernels (1-D 3, 3x3, 5x5)
// fused, others one multiply-add pass per tap.
template <typename T>
void Taps(int64_t n, int64_t taps, const T* w, const int64_t* off, T b,
          const T* x, T* y) {
  switch (taps) {
    case 3:
      return FusedTaps<3>(n, w, off, b, x, y);
    case 9:
      return FusedTaps<9>(n, w, off, b, x, y);
    case 25:
      return FusedTaps<25>(n, w, off, b, x, y);
    default:
      std::fill(y, y + n, b);
      for (int64_t t = 0; t < taps; ++t) Axpy(n, w[t], x + off[t], y);
  }
}

// Copies planes of h x w into zero-bordered planes of hp x wp.
template <typename T>
void Pad(const T* in, int64_t planes, int64_t h, int64_t w, int64_t ph,
         int64_t pw, const Grid& grid, T* out) {
  for (int64_t p = 0; p < planes; ++p) {
    T* dst = out + p * grid.plane;
    if (ph == 0 && pw == 0) {
      std::memcpy(dst, in + p * h * w, h * w * sizeof(T));
      continue;
    }
    std::memset(dst, 0, grid.plane * sizeof(T));
    for (int64_t r = 0; r < h; ++r) {
      std::memcpy(dst + (r + ph) * grid.wp + pw, in + (p * h + r) * w,
                  w * sizeof(T));
    }
  }
}

// Places the output gradients of samples [n0, n0 + count) of one channel
// (dy: [N][OH][OW]) on a zeroed grid block.
template <typename T>
void Scatter(const ConvGeometry& g, const Grid& grid, const T* dy, int64_t n0,
             int64_t count, T* block) {
  std::memset(block, 0, grid.Length(count) * sizeof(T));
  for (int64_t n = 0; n < count; ++n) {
    const T* src = dy + (n0 + n) * grid.oh * grid.ow;
    T* dst = block + n * grid.plane;
    for (int64_t y = 0; y < grid.oh; ++y) {
      T* row = dst + y * g.stride * grid.wp;
      const T* s = src + y * grid.ow;
      if (g.stride == 1) {
        std::memcpy(row, s, grid.ow * sizeof(T));
      } else {
        for (int64_t x = 0; x < grid.ow; ++x) row[x * g.stride] = s[x];
      }
    }
  }
}

// Channels are independent: OverChannels runs body(first, last, slot) over
// ranges of them on the compute threads, the same result at any thread
// count; `slot`, below RangeSlots(), names the scratch that range uses
// alone.
template <typename Body>
void OverChannels(int64_t channels, int64_t per_channel, const Body& body) {
  ParallelItems(
      channels, ItemGrain(per_channel),
      [&](int64_t first, int64_t last) { body(first, last, RangeSlot()); });
}

// Runs body(oc, block) for every output channel on the compute threads,
// `block` a grid block of ws->scratch that the call uses alone.
template <typename T, typename Body>
void OverOutputChannels(const ConvGeometry& g, const Grid& grid,
                        ConvWorkspace<T>* ws, const Body& body) {
  const int64_t taps = static_cast<int64_t>(grid.taps.size());
  const int64_t block_len = SlotLength<T>(grid.Length(grid.per_block));
  Grow(&ws->scratch, RangeSlots() * block_len);
  OverChannels(g.out_channels, g.batch * grid.oh * grid.ow * taps,
               [&](int64_t oc0, int64_t oc1, int64_t slot) {
                 T* block = ws->scratch.data() + slot * block_len;
                 for (int64_t oc = oc0; oc < oc1; ++oc) body(oc, block);
               });
}

// Output channel oc of the forward pass from the padded input, through a
// grid block of the caller's.
template <typename T>
void ForwardChannel(const ConvGeometry& g, const Grid& grid, int64_t oc,
                    const T* padded, const T* weight, const T* bias, T* out,
                    T* block) {
  const int64_t m = g.out_channels / g.in_channels;
  const int64_t taps = static_cast<int64_t>(grid.taps.size());
  const T* x = padded + (oc / m) * g.batch * grid.plane;
  const T* w = weight + oc * taps;
  const T b = bias != nullptr ? bias[oc] : T(0);
  T* y = out + oc * g.batch * grid.oh * grid.ow;
  for (int64_t n0 = 0; n0 < g.batch; n0 += grid.per_block) {
    const int64_t count = std::min(grid.per_block, g.batch - n0);
    Taps(grid.Length(count), taps, w, grid.taps.data(), b, x + n0 * grid.plane,
         block);
    for (int64_t n = 0; n < count; ++n) {
      for (int64_t r = 0; r < grid.oh; ++r) {
        const T* src = block + n * grid.plane + r * g.stride * grid.wp;
        T* dst = y + ((n0 + n) * grid.oh + r) * grid.ow;
        if (g.stride == 1) {
          std::memcpy(dst, src, grid.ow * sizeof(T));
        } else {
          for (int64_t c = 0; c < grid.ow; ++c) dst[c] = src[c * g.stride];
        }
      }
    }
  }
}

// Output channel oc's weight gradient.
template <typename T>
void WeightGradChannel(const ConvGeometry& g, const Grid& grid, int64_t oc,
                       const T* padded, const T* grad_out, T* grad_weight,
                       T* block) {
  const int64_t m = g.out_channels / g.in_channels;
  const int64_t taps = static_cast<int64_t>(grid.taps.size());
  const T* x = padded + (oc / m) * g.batch * grid.plane;
  const T* dy = grad_out + oc * g.batch * grid.oh * grid.ow;
  T* gw = grad_weight + oc * taps;
  std::fill(gw, gw + taps, T(0));
  for (int64_t n0 = 0; n0 < g.batch; n0 += grid.per_block) {
    const int64_t count = std::min(grid.per_block, g.batch - n0);
    const int64_t len = grid.Length(count);
    Scatter(g, grid, dy, n0, count, block);
    const T* xb = x + n0 * grid.plane;
    for (int64_t t = 0; t < taps; ++t) {
      gw[t] += Dot(len, block, xb + grid.taps[t]);
    }
  }
}

// The input gradient's scratch for one range of channels: `block` starts
// with `margin` zeros; `gp` holds one channel's padded gradient.
template <typename T>
struct InputGradScratch {
  T* block;
  T* gp;
  T* part;
};

// Input channel c's gradient: the correlation of each of its output
// channels' gradients with the mirrored taps, cropped to the input.
template <typename T>
void InputGradChannel(const ConvGeometry& g, const Grid& grid, int64_t c,
                      const std::vector<int64_t>& mirrored, const T* grad_out,
                      const T* weight, T* grad_in,
                      const InputGradScratch<T>& s) {
  const int64_t m = g.out_channels / g.in_channels;
  const int64_t taps = static_cast<int64_t>(grid.taps.size());
  const int64_t margin = grid.taps.back();
  for (int64_t oc = c * m; oc < (c + 1) * m; ++oc) {
    const T* dy = grad_out + oc * g.batch * grid.oh * grid.ow;
    const T* w = weight + oc * taps;
    for (int64_t n0 = 0; n0 < g.batch; n0 += grid.per_block) {
      const int64_t count = std::min(grid.per_block, g.batch - n0);
      const int64_t len = count * grid.plane;
      // Scatter zeroes the grid up to the last output; the correlation
      // reads the last sample's tail too.
      Scatter(g, grid, dy, n0, count, s.block + margin);
      const int64_t used = grid.Length(count);
      std::memset(s.block + margin + used, 0, (len - used) * sizeof(T));
      T* gb = s.gp + n0 * grid.plane;
      if (oc == c * m) {
        Taps(len, taps, w, mirrored.data(), T(0), s.block, gb);
      } else {
        Taps(len, taps, w, mirrored.data(), T(0), s.block, s.part);
        for (int64_t i = 0; i < len; ++i) gb[i] += s.part[i];
      }
    }
  }
  T* dst = grad_in + c * g.batch * g.in_h * g.in_w;
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t r = 0; r < g.in_h; ++r) {
      std::memcpy(dst + (n * g.in_h + r) * g.in_w,
                  s.gp + n * grid.plane + (r + g.pad_h) * grid.wp + g.pad_w,
                  g.in_w * sizeof(T));
    }
  }
}

// ws->padded = the input's planes on the grid.
template <typename T>
void PadInput(const ConvGeometry& g, const Grid& grid, const T* in,
              ConvWorkspace<T>* ws) {
  Grow(&ws->padded, g.in_channels * g.batch * grid.plane);
  const int64_t in_plane = g.in_h * g.in_w;
  OverChannels(g.in_channels, g.batch * grid.plane,
               [&](int64_t c0, int64_t c1, int64_t) {
                 Pad(in + c0 * g.batch * in_plane, (c1 - c0) * g.batch, g.in_h,
                     g.in_w, g.pad_h, g.pad_w, grid,
                     ws->padded.data() + c0 * g.batch * grid.plane);
               });
}

}  // namespace

// ws->input is the padded input after the grid kernels, the input itself
// after the row kernels, whose weight gradient reads it in place.
template <typename T>
void DepthwiseForward(const ConvGeometry& g, const T* in, const T* weight,
                      const T* bias, T* out, ConvWorkspace<T>* ws) {
  DCHECK(g.depthwise());
  if (DepthwiseRowsForwardApplies(g)) {
    DepthwiseRowsForward(g, in, weight, bias, out, ws);
    ws->input = in;
    return;
  }
  const Grid grid(g);
  PadInput(g, grid, in, ws);
  ws->input = ws->padded.data();
  OverOutputChannels(g, grid, ws, [&](int64_t oc, T* block) {
    ForwardChannel(g, grid, oc, ws->padded.data(), weight, bias, out, block);
  });
}

template <typename T>
void DepthwiseWeightGrad(const ConvGeometry& g, const T* grad_out,
                         T* grad_weight, ConvWorkspace<T>* ws) {
  CHECK(ws->input != nullptr) << "DepthwiseWeightGrad before DepthwiseForward";
  if (DepthwiseRowsForwardApplies(g)) {  // ws->input is not padded
    DepthwiseRowsWeightGrad(g, ws->input, grad_out, grad_weight, ws);
    return;
  }
  const Grid grid(g);
  OverOutputChannels(g, grid, ws, [&](int64_t oc, T* block) {
    WeightGradChannel(g, grid, oc, ws->input, grad_out, grad_weight, block);
  });
}

template <typename T>
void DepthwiseInputGrad(const ConvGeometry& g, const T* grad_out,
                        const T* weight, T* grad_in, ConvWorkspace<T>* ws) {
  if (DepthwiseRowsInputGradApplies(g)) {
    DepthwiseRowsInputGrad(g, grad_out, weight, grad_in, ws);
    return;
  }
  const Grid grid(g);
  const int64_t m = g.out_channels / g.in_channels;
  const int64_t taps = static_cast<int64_t>(grid.taps.size());
  // The gradient at padded position j is sum_t w[t] * dy_grid[j - off[t]]:
  // a correlation with the taps mirrored, read from the output gradient's
  // grid placed `margin` zeros into the block (so that j - off[t] >= 0).
  const int64_t margin = grid.taps.back();
  std::vector<int64_t> mirrored(taps);
  for (int64_t t = 0; t < taps; ++t) mirrored[t] = margin - grid.taps[t];
  const int64_t block_len = SlotLength<T>(margin + grid.per_block * grid.plane);
  const int64_t gp_len = SlotLength<T>(g.batch * grid.plane);
  const int64_t part_len = SlotLength<T>(grid.per_block * grid.plane);
  const int64_t slots = RangeSlots();
  Grow(&ws->scratch, slots * block_len);
  Grow(&ws->grad_padded, slots * gp_len);
  Grow(&ws->packed, slots * part_len);
  OverChannels(
      g.in_channels, m * g.batch * grid.plane * taps,
      [&](int64_t c0, int64_t c1, int64_t slot) {
        const InputGradScratch<T> s{ws->scratch.data() + slot * block_len,
                                    ws->grad_padded.data() + slot * gp_len,
                                    ws->packed.data() + slot * part_len};
        std::memset(s.block, 0, margin * sizeof(T));
        for (int64_t c = c0; c < c1; ++c) {
          InputGradChannel(g, grid, c, mirrored, grad_out, weight, grad_in, s);
        }
      });
}

#define COHORT_INSTANTIATE_DEPTHWISE(T)                                        \
  template void DepthwiseForward<T>(const ConvGeometry&, const T*, const T*,   \
                                    const T*, T*, ConvWorkspace<T>*);          \
  template void DepthwiseWeightGrad<T>(const ConvGeometry&, const T*, T*,      \
                                       ConvWorkspace<T>*);                     \
  template void DepthwiseInputGrad<T>(const ConvGeometry&, const T*, const T*, \
                                      T*, ConvWorkspace<T>*);

COHORT_INSTANTIATE_DEPTHWISE(float)
COHORT_INSTANTIATE_DEPTHWISE(double)
#undef COHORT_INSTANTIATE_DEPTHWISE

}  // namespace conv_internal
}  // namespace cohort

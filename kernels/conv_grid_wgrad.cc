// Weight gradient of the grid convolution (see conv_internal.h).
//
// grad_w[oc][k] = sum over positions q of dv[oc][q] * x[off[k] + q], where dv
// is the output gradient on the grid (zero at the columns that produce no
// output). Positions are the reduction axis, so blocks of MB output
// channels x KB taps accumulate 8-wide partial sums in registers over a
// group of runs and only then add them to memory; the horizontal sums are
// taken once at the end.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "common/logging.h"
#include "kernels/conv_internal.h"

namespace cohort {
namespace conv_internal {
namespace {

constexpr int kMaxSegments = 64;  // runs per group
// Positions per group: 4 output channels' gradient (16 KiB) and the input
// rows of a few taps stay in L1 while a block sweeps them.
constexpr int64_t kGradChunk = 1024;

// A run of grid positions of one sample: x points at the input for the
// run's first position, dv at channel 0's output gradient for it.
struct Segment {
  const float* x;
  const float* dv;
  int64_t len;
};

// Mask of the first `n` lanes, for loads that must not pass a run's end.
__m256i FirstLanes(int64_t n) {
  static const int32_t kLanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                     0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLanes + 8 - n));
}

// part[i][j][0..8) += sum over the runs of dv[row0 + i*ld + q] *
// x[off[j] + q], for MB output channels and KB taps; part rows are kk * 8
// floats apart. The last partial vector of a run uses masked loads, which
// read nothing past the run.
template <int MB, int KB>
void GradBlock(const Segment* seg, int64_t nseg, int64_t row0, int64_t ld,
               const int64_t* off, float* part, int64_t kk) {
  __m256 acc[MB][KB];
#pragma GCC unroll 4
  for (int i = 0; i < MB; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < KB; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  for (int64_t s = 0; s < nseg; ++s) {
    const float* a = seg[s].dv + row0;
    const float* x = seg[s].x;
    const int64_t full = seg[s].len / 8 * 8;
    for (int64_t q = 0; q < full; q += 8) {
      __m256 b[KB];
#pragma GCC unroll 4
      for (int j = 0; j < KB; ++j) b[j] = _mm256_loadu_ps(x + off[j] + q);
#pragma GCC unroll 4
      for (int i = 0; i < MB; ++i) {
        const __m256 ai = _mm256_loadu_ps(a + i * ld + q);
#pragma GCC unroll 4
        for (int j = 0; j < KB; ++j) {
          acc[i][j] = _mm256_fmadd_ps(ai, b[j], acc[i][j]);
        }
      }
    }
    if (full < seg[s].len) {
      const __m256i mask = FirstLanes(seg[s].len - full);
      __m256 b[KB];
#pragma GCC unroll 4
      for (int j = 0; j < KB; ++j) {
        b[j] = _mm256_maskload_ps(x + off[j] + full, mask);
      }
#pragma GCC unroll 4
      for (int i = 0; i < MB; ++i) {
        const __m256 ai = _mm256_maskload_ps(a + i * ld + full, mask);
#pragma GCC unroll 4
        for (int j = 0; j < KB; ++j) {
          acc[i][j] = _mm256_fmadd_ps(ai, b[j], acc[i][j]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MB; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < KB; ++j) {
      float* p = part + i * kk * 8 + j * 8;
      _mm256_store_ps(p, _mm256_add_ps(_mm256_load_ps(p), acc[i][j]));
    }
  }
}

using GradFn = void (*)(const Segment*, int64_t, int64_t, int64_t,
                        const int64_t*, float*, int64_t);

// GradBlock<MB, KB> for every block shape with at most 12 accumulators
// (the other 4 of the 16 AVX registers hold the operands), MB, KB <= 4.
template <int MB, int KB>
constexpr GradFn GradFnFor() {
  if constexpr (MB * KB <= 12) {
    return &GradBlock<MB, KB>;
  } else {
    return nullptr;
  }
}

template <int MB>
constexpr std::array<GradFn, 5> GradFnRow() {
  return {nullptr, GradFnFor<MB, 1>(), GradFnFor<MB, 2>(), GradFnFor<MB, 3>(),
          GradFnFor<MB, 4>()};
}

constexpr std::array<std::array<GradFn, 5>, 5> kGradFns = {
    {{}, GradFnRow<1>(), GradFnRow<2>(), GradFnRow<3>(), GradFnRow<4>()}};

struct BlockShape {
  int mb;  // output channels
  int kb;  // taps
};

// Cycles per 8 positions of one block on a 2-FMA, 2-load core whose FMA
// latency is 4: MB x KB FMAs, MB + KB loads, and each accumulator chain
// waits for its previous FMA.
double StepCycles(int64_t mb, int64_t kb) {
  return std::max({mb * kb / 2.0, (mb + kb) / 2.0, 4.0});
}

// The block shape that covers OC x KK in the fewest modelled cycles,
// remainder blocks included (e.g. OC = 6 runs as 3 + 3, not 4 + 2). 6 x 2
// and 2 x 6 were measured 2-3x slower than these (register spills).
BlockShape ChooseGradBlocks(int64_t oc, int64_t kk) {
  constexpr BlockShape kCandidates[] = {{4, 3}, {3, 4}};
  BlockShape best = kCandidates[0];
  double best_cost = 1e300;
  for (const BlockShape& c : kCandidates) {
    double cost = 0;
    for (int64_t o = 0; o < oc; o += c.mb) {
      for (int64_t k = 0; k < kk; k += c.kb) {
        cost += StepCycles(std::min<int64_t>(c.mb, oc - o),
                           std::min<int64_t>(c.kb, kk - k));
      }
    }
    if (cost < best_cost) best_cost = cost, best = c;
  }
  return best;
}

// Sums one group of runs into the partial sums, block by block, so that a
// block's operands are read while they are still in cache. Output-gradient
// rows of channel o are ld floats apart.
void GradGroup(const GridConv& g, const Segment* seg, int64_t nseg, int64_t ld,
               const int64_t* off, float* part) {
  const int64_t kk = g.patch();
  const BlockShape shape = ChooseGradBlocks(g.out_channels, kk);
  for (int64_t k0 = 0; k0 < kk; k0 += shape.kb) {
    const int64_t kb = std::min<int64_t>(shape.kb, kk - k0);
    for (int64_t o0 = 0; o0 < g.out_channels; o0 += shape.mb) {
      const int64_t mb = std::min<int64_t>(shape.mb, g.out_channels - o0);
      kGradFns[mb][kb](seg, nseg, o0 * ld, ld, off + k0,
                       part + (o0 * kk + k0) * 8, kk);
    }
  }
}

// Collects runs into groups of at most kGradChunk positions and sums each
// full group.
class Grouper {
 public:
  Grouper(const GridConv& g, int64_t ld, const int64_t* off, float* part)
      : g_(g), ld_(ld), off_(off), part_(part) {}
  // Whether a run of `len` positions still fits in the current group.
  bool Fits(int64_t len) const {
    return used_ + len <= kGradChunk && nseg_ < kMaxSegments;
  }
  int64_t used() const { return used_; }
  void Add(const float* x, const float* dv, int64_t len, int64_t room) {
    seg_[nseg_++] = {x, dv, len};
    used_ += room;
  }
  void Flush() {
    if (nseg_ > 0) GradGroup(g_, seg_, nseg_, ld_, off_, part_);
    nseg_ = used_ = 0;
  }

 private:
  const GridConv& g_;
  int64_t ld_;
  const int64_t* off_;
  float* part_;
  Segment seg_[kMaxSegments];
  int64_t nseg_ = 0, used_ = 0;
};

// Writes grid positions [q0, q1) of sample n of grad_out into dv (rows ld
// apart, from column `col`), zero where ow >= OW.
void Expand(const GridConv& g, int64_t n, int64_t q0, int64_t q1,
            const float* grad_out, float* dv, int64_t ld, int64_t col) {
  const int64_t oh = g.out_h(), ow = g.out_w();
  const int64_t channel_stride = g.batch * oh * ow;
  for (int64_t oc = 0; oc < g.out_channels; ++oc) {
    float* d = dv + oc * ld + col;
    const float* src = grad_out + oc * channel_stride + n * oh * ow;
    for (int64_t q = q0; q < q1;) {
      const int64_t r = q / g.width, c = q % g.width;
      const int64_t end = std::min(q1, (r + 1) * g.width);
      const int64_t len = std::max<int64_t>(0, std::min(ow, c + end - q) - c);
      std::memcpy(d + (q - q0), src + r * ow + c, len * sizeof(float));
      std::memset(d + (q - q0) + len, 0, (end - q - len) * sizeof(float));
      q = end;
    }
  }
}

// Several output rows: the gradient is expanded onto the grid in scratch,
// several samples per group for small images.
void WeightGradRows(const GridConv& g, const float* x, const float* grad_out,
                    const int64_t* off, float* part, float* dv) {
  const int64_t span = g.span();
  Grouper group(g, kGradChunk, off, part);
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* xs = x + n * g.height * g.width;
    for (int64_t q0 = 0; q0 < span; q0 += kGradChunk) {
      const int64_t q1 = std::min(span, q0 + kGradChunk);
      const int64_t room = (q1 - q0 + 7) / 8 * 8;  // aligned runs
      if (!group.Fits(room)) group.Flush();
      Expand(g, n, q0, q1, grad_out, dv, kGradChunk, group.used());
      group.Add(xs + q0, dv + group.used(), q1 - q0, room);
    }
  }
  group.Flush();
}

// One output row (1-D): runs read the output gradient in place, and the
// positions whose taps reach into the virtual padding are summed by plain
// loops into lane 0 of the partial sums.
void WeightGradRow(const GridConv& g, const float* x, const float* grad_out,
                   const int64_t* off, float* part) {
  const int64_t ow = g.out_w(), kk = g.patch(), pad = g.pad_w;
  const int64_t ld = g.batch * ow;
  const int64_t lo = std::min(pad, ow), hi = std::max(lo, ow - pad);
  Grouper group(g, ld, off, part);
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* xs = x + n * g.height * g.width - pad;
    const float* dvs = grad_out + n * ow;
    for (int64_t q0 = lo; q0 < hi; q0 += kGradChunk) {
      const int64_t len = std::min(hi, q0 + kGradChunk) - q0;
      if (!group.Fits(len)) group.Flush();
      group.Add(xs + q0, dvs + q0, len, len);
    }
    const auto edge = [&](int64_t q) {
      for (int64_t k = 0; k < kk; ++k) {
        const int64_t col = q - pad + k % g.kernel_w;
        if (col < 0 || col >= g.width) continue;
        for (int64_t oc = 0; oc < g.out_channels; ++oc) {
          part[(oc * kk + k) * 8] += dvs[oc * ld + q] * xs[off[k] + q];
        }
      }
    };
    for (int64_t q = 0; q < lo; ++q) edge(q);
    for (int64_t q = hi; q < ow; ++q) edge(q);
  }
  group.Flush();
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

void GridWeightGrad(const GridConv& g, const float* x, const float* grad_out,
                    float* grad_w, Tensor* scratch,
                    std::vector<int64_t>* offsets) {
  DCHECK(g.out_h() > 0 && g.out_w() > 0);
  DCHECK(g.pad_w == 0 || g.out_h() == 1);
  TapOffsets(g, offsets);
  const int64_t kk = g.patch();
  const int64_t part_size = g.out_channels * kk * 8;
  const bool one_row = g.out_h() == 1;
  EnsureSize(scratch, part_size + (one_row ? 0 : g.out_channels * kGradChunk));
  float* part = scratch->data();
  std::memset(part, 0, part_size * sizeof(float));
  if (one_row) {
    WeightGradRow(g, x, grad_out, offsets->data(), part);
  } else {
    WeightGradRows(g, x, grad_out, offsets->data(), part, part + part_size);
  }
  for (int64_t i = 0; i < g.out_channels * kk; ++i) {
    grad_w[i] = HorizontalSum(_mm256_load_ps(part + i * 8));
  }
}

}  // namespace conv_internal
}  // namespace cohort

// Milliseconds per call of the convolution and GEMM kernels on the shapes of
// the benchmark models, of ResNet-18 (CIFAR) and ResNet-50 and of
// MobileNetV2's depthwise layers, single-
// threaded, for each algorithm (oneDNN's times include its reorders), and
// for 3x3 stride-1 layers oneDNN against Winograd on channel-blocked
// activations (no reorders), and both backward passes on those activations
// one after the other against side by side (which takes a team of two:
// pass 2 as the thread count); also checks that the algorithms agree.
// Prints medians of repeated calls.
//
//   bazel build //kernels:conv_bench && bazel-bin/kernels/conv_bench [filter]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "dnnl.hpp"
#include "kernels/blocked_weights.h"
#include "kernels/channel_blocked.h"
#include "kernels/conv.h"
#include "kernels/conv_onednn.h"
#include "kernels/gemm.h"

namespace cohort {
namespace {

// Set when two algorithms disagree; main() then exits 1.
bool g_mismatch = false;

double MedianMs(const std::function<void()>& f, int reps) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - a)
                    .count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void FillRandom(Tensor* t, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < t->size(); ++i) (*t)[i] = normal(rng);
}

double MaxRelDiff(const Tensor& a, const Tensor& b) {
  double scale = 1e-30, diff = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
  }
  return diff / scale;
}

struct Result {
  double fwd, wgrad, igrad;
};

// `block`: activations in nChw{block}c (ConvWorkspace::channel_block), as a
// residual block keeps them; 0 for batch-inner.
Result TimeConv(const ConvGeometry& g, ConvAlgorithm algo, bool need_input,
                int reps, Tensor* out, Tensor* gw, Tensor* gi,
                int64_t block = 0) {
  std::mt19937_64 rng(1);
  Tensor in({g.in_channels * g.batch * g.in_h * g.in_w});
  Tensor w({g.out_channels * g.patch()}), b({g.out_channels});
  Tensor go({g.out_channels * g.positions()}), gb({g.out_channels});
  FillRandom(&in, rng);
  FillRandom(&w, rng);
  FillRandom(&b, rng);
  FillRandom(&go, rng);
  out->Resize({g.out_channels * g.positions()});
  gw->Resize(w.shape());
  gi->Resize(in.shape());
  ConvWorkspace<float> ws;
  ws.algorithm = algo;
  ws.channel_block = block;
  Result r;
  r.fwd = MedianMs(
      [&] { ConvForward(g, in.data(), w.data(), b.data(), out->data(), &ws); },
      reps);
  r.wgrad = MedianMs(
      [&] { ConvBackwardWeights(g, go.data(), gw->data(), gb.data(), &ws); },
      reps);
  r.igrad = need_input ? MedianMs(
                             [&] {
                               ConvBackwardInput(g, go.data(), w.data(),
                                                 gi->data(), &ws);
                             },
                             reps)
                       : 0.0;
  return r;
}

// oneDNN's direct kernels and Winograd (cohort's on nChw8c, oneDNN's on
// nChw16c) on this machine's channel-blocked activations (no reorders: a
// residual block keeps its activations so), compared with each other.
void BenchBlocked(const ConvGeometry& g, bool need_input, int reps) {
  const int64_t block = NativeChannelBlock();
  if (block == 0 || g.in_channels % block != 0 || g.out_channels % block != 0) {
    return;
  }
  Tensor o1, w1, i1, o2, w2, i2;
  const Result dnnl = TimeConv(g, ConvAlgorithm::kOnednn, need_input, reps, &o1,
                               &w1, &i1, block);
  const Result wino = TimeConv(g, ConvAlgorithm::kWinograd, need_input, reps,
                               &o2, &w2, &i2, block);
  double d = std::max(MaxRelDiff(o2, o1), MaxRelDiff(w2, w1));
  if (need_input) d = std::max(d, MaxRelDiff(i2, i1));
  std::printf(
      "%-12s nChw%dc onednn fwd %7.3f  wgrad %7.3f  igrad %7.3f  total %7.3f "
      "ms\n",
      "", static_cast<int>(block), dnnl.fwd, dnnl.wgrad, dnnl.igrad,
      dnnl.fwd + dnnl.wgrad + dnnl.igrad);
  std::printf(
      "%-12s nChw%dc winograd fwd %7.3f  wgrad %7.3f  igrad %7.3f  total "
      "%7.3f ms  max rel diff %.1e%s\n",
      "", static_cast<int>(block), wino.fwd, wino.wgrad, wino.igrad,
      wino.fwd + wino.wgrad + wino.igrad, d, d > 1e-4 ? "  MISMATCH" : "");
  g_mismatch |= d > 1e-4;
}

// Both backward passes on this machine's channel-blocked activations, each
// pass's algorithm as a residual block's layer runs it: one after the other
// on the whole team, and (on a team of two) side by side, one thread each.
void BenchBackward(const ConvGeometry& g, int reps) {
  const int64_t block = NativeChannelBlock();
  if (block == 0 || g.in_channels % block != 0 || g.out_channels % block != 0) {
    return;
  }
  std::mt19937_64 rng(1);
  Tensor in({g.in_channels * g.batch * g.in_h * g.in_w});
  Tensor w({g.out_channels * g.patch()}), out({g.out_channels * g.positions()});
  Tensor go(out.shape());
  FillRandom(&in, rng);
  FillRandom(&w, rng);
  FillRandom(&go, rng);
  double ms[2];
  Tensor gw[2], gi[2];
  for (int side = 0; side < 2; ++side) {
    ConvWorkspace<float> ws;
    ws.channel_block = block;
    ws.side_by_side = side == 1 ? SideBySide::kAlways : SideBySide::kNever;
    gw[side].Resize(w.shape());
    gi[side].Resize(in.shape());
    ConvForward<float>(g, in.data(), w.data(), nullptr, out.data(), &ws);
    ms[side] = MedianMs(
        [&] {
          ConvBackward<float>(g, go.data(), w.data(), gw[side].data(), nullptr,
                              gi[side].data(), &ws);
        },
        reps);
  }
  const double d = std::max(MaxRelDiff(gw[1], gw[0]), MaxRelDiff(gi[1], gi[0]));
  std::printf(
      "%-12s nChw%dc backward  in turn %7.3f  side by side %7.3f ms  "
      "(%.2fx)  max rel diff %.1e%s\n",
      "", static_cast<int>(block), ms[0], ms[1], ms[0] / ms[1], d,
      d > 1e-4 ? "  MISMATCH" : "");
  g_mismatch |= d > 1e-4;
}

// Evaluation as `cohort predict` (frozen weights) and the evaluation during
// training (not frozen: the weights are checked on every call) run a
// ResNet's 3x3 layers (ConvForwardScaled on this machine's channel-blocked
// layout, the batch norm and ReLU folded in, no residual sum): milliseconds
// of oneDNN's direct kernels and of Winograd, which must agree.
void BenchScaled(const char* name, const ConvGeometry& g, bool frozen,
                 int reps) {
  std::mt19937_64 rng(1);
  Tensor in({g.in_channels * g.batch * g.in_h * g.in_w});
  Tensor w({g.out_channels * g.patch()});
  Tensor scale({g.out_channels}), shift({g.out_channels});
  for (Tensor* t : {&in, &w, &scale, &shift}) FillRandom(t, rng);
  const ConvAlgorithm algos[2] = {ConvAlgorithm::kOnednn,
                                  ConvAlgorithm::kWinograd};
  double ms[2];
  Tensor out[2];
  for (int i = 0; i < 2; ++i) {
    ConvWorkspace<float> ws;
    ws.algorithm = algos[i];
    ws.channel_block = NativeChannelBlock();
    ws.weights_frozen = frozen;
    out[i].Resize({g.out_channels * g.positions()});
    ms[i] = MedianMs(
        [&] {
          ConvForwardScaled(g, in.data(), w.data(), scale.data(), shift.data(),
                            /*residual=*/nullptr, /*relu=*/true, out[i].data(),
                            &ws);
        },
        reps);
  }
  const double d = MaxRelDiff(out[1], out[0]);
  std::printf(
      "%-26s onednn %7.3f  winograd %7.3f ms  (%.2fx)  max rel diff "
      "%.1e%s\n",
      name, ms[0], ms[1], ms[0] / ms[1], d, d > 1e-4 ? "  MISMATCH" : "");
  g_mismatch |= d > 1e-4;
}

// `large`: a ResNet shape, where the grid and channel kernels (tuned for a
// few channels) are slow and kAuto's line already shows the best of them.
void BenchConv(const char* name, const ConvGeometry& g, bool need_input,
               int reps, bool large = false) {
  Tensor o1, w1, i1, o2, w2, i2;
  const Result best =
      TimeConv(g, ConvAlgorithm::kAuto, need_input, reps, &o1, &w1, &i1);
  const Result im2col =
      TimeConv(g, ConvAlgorithm::kIm2col, need_input, reps, &o2, &w2, &i2);
  const double gflop = 2.0 * g.out_channels * g.patch() * g.positions() / 1e9;
  double diff = std::max(MaxRelDiff(o1, o2), MaxRelDiff(w1, w2));
  if (need_input) diff = std::max(diff, MaxRelDiff(i1, i2));
  const double total = best.fwd + best.wgrad + best.igrad;
  std::printf(
      "%-12s auto   fwd %7.3f  wgrad %7.3f  igrad %7.3f  total %7.3f ms"
      "  (%4.1f GFLOP/s)\n",
      name, best.fwd, best.wgrad, best.igrad, total,
      gflop * (need_input ? 3 : 2) / total * 1e3);
  std::printf(
      "%-12s im2col fwd %7.3f  wgrad %7.3f  igrad %7.3f  total %7.3f ms"
      "  max rel diff %.1e%s\n",
      "", im2col.fwd, im2col.wgrad, im2col.igrad,
      im2col.fwd + im2col.wgrad + im2col.igrad, diff,
      diff > 1e-4 ? "  MISMATCH" : "");
  g_mismatch |= diff > 1e-4;
  if (g.groups == 1) {
    // oneDNN, reorders into and out of its layouts included.
    Tensor o5, w5, i5;
    const Result dnnl =
        TimeConv(g, ConvAlgorithm::kOnednn, need_input, reps, &o5, &w5, &i5);
    double d = std::max(MaxRelDiff(o5, o2), MaxRelDiff(w5, w2));
    if (need_input) d = std::max(d, MaxRelDiff(i5, i2));
    std::printf(
        "%-12s onednn fwd %7.3f  wgrad %7.3f  igrad %7.3f  total %7.3f ms"
        "  max rel diff %.1e%s\n",
        "", dnnl.fwd, dnnl.wgrad, dnnl.igrad,
        dnnl.fwd + dnnl.wgrad + dnnl.igrad, d, d > 1e-4 ? "  MISMATCH" : "");
    g_mismatch |= d > 1e-4;
  }
  if (g.groups == 1 && g.kernel_h == 3 && g.kernel_w == 3 && g.stride == 1 &&
      g.pad_h == 1 && g.in_channels % 8 == 0 && g.out_channels % 8 == 0) {
    BenchBlocked(g, need_input, reps);
  }
  if (g.groups == 1 && need_input) BenchBackward(g, reps);
  if (g.stride == 1 && !large) {
    // The alternatives kAuto chooses between, per pass.
    Tensor o3, w3, i3, o4, w4, i4;
    const Result grid =
        TimeConv(g, ConvAlgorithm::kGrid, need_input, reps, &o3, &w3, &i3);
    const Result chan =
        TimeConv(g, ConvAlgorithm::kChannels, need_input, reps, &o4, &w4, &i4);
    double d = std::max({MaxRelDiff(o3, o2), MaxRelDiff(w3, w2),
                         MaxRelDiff(o4, o2), MaxRelDiff(w4, w2)});
    if (need_input) d = std::max({d, MaxRelDiff(i3, i2), MaxRelDiff(i4, i2)});
    std::printf(
        "%-12s grid   fwd %7.3f  wgrad %7.3f  igrad %7.3f  (channels / "
        "column: %7.3f %7.3f %7.3f)  max rel diff %.1e%s\n",
        "", grid.fwd, grid.wgrad, grid.igrad, chan.fwd, chan.wgrad, chan.igrad,
        d, d > 1e-4 ? "  MISMATCH" : "");
    g_mismatch |= d > 1e-4;
  }
}

ConvGeometry Conv2(int64_t n, int64_t c, int64_t h, int64_t oc, int64_t k,
                   int64_t p) {
  ConvGeometry g;
  g.batch = n;
  g.in_channels = c;
  g.in_h = g.in_w = h;
  g.out_channels = oc;
  g.kernel_h = g.kernel_w = k;
  g.pad_h = g.pad_w = p;
  return g;
}

ConvGeometry Strided(ConvGeometry g, int64_t s) {
  g.stride = s;
  return g;
}

ConvGeometry Conv1(int64_t n, int64_t c, int64_t l, int64_t oc, int64_t k,
                   int64_t p) {
  ConvGeometry g = Conv2(n, c, 1, oc, k, 0);
  g.in_w = l;
  g.kernel_h = 1;
  g.pad_w = p;
  return g;
}

// The three products of a linear layer, as the layer issues them.
struct LinearTimes {
  double fwd, wgrad, igrad;
  double total() const { return fwd + wgrad + igrad; }
};

using GemmFn = void (*)(Trans, Trans, int64_t, int64_t, int64_t, float,
                        const float*, int64_t, const float*, int64_t, float,
                        float*, int64_t);

void OpenBlasGemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k,
                  float alpha, const float* a, int64_t lda, const float* b,
                  int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta == Trans::kYes ? CblasTrans : CblasNoTrans,
              tb == Trans::kYes ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
              lda, b, ldb, beta, c, ldc);
}

LinearTimes TimeLinear(GemmFn gemm, int64_t n, int64_t in, int64_t out,
                       int reps, Tensor* y, Tensor* dw, Tensor* dx) {
  std::mt19937_64 rng(2);
  Tensor x({n * in}), w({out * in}), dy({n * out});
  FillRandom(&x, rng);
  FillRandom(&w, rng);
  FillRandom(&dy, rng);
  y->Resize({n * out});
  dw->Resize({out * in});
  dx->Resize({n * in});
  LinearTimes t;
  t.fwd = MedianMs(
      [&] {
        gemm(Trans::kNo, Trans::kYes, n, out, in, 1.0f, x.data(), in, w.data(),
             in, 0.0f, y->data(), out);
      },
      reps);
  t.wgrad = MedianMs(
      [&] {
        gemm(Trans::kYes, Trans::kNo, out, in, n, 1.0f, dy.data(), out,
             x.data(), in, 0.0f, dw->data(), in);
      },
      reps);
  t.igrad = MedianMs(
      [&] {
        gemm(Trans::kNo, Trans::kNo, n, in, out, 1.0f, dy.data(), out, w.data(),
             in, 0.0f, dx->data(), in);
      },
      reps);
  return t;
}

void BenchLinear(const char* name, int64_t n, int64_t in, int64_t out,
                 int reps) {
  Tensor y1, w1, x1, y2, w2, x2;
  const LinearTimes ours =
      TimeLinear(&Gemm<float>, n, in, out, reps, &y1, &w1, &x1);
  const LinearTimes blas =
      TimeLinear(&OpenBlasGemm, n, in, out, reps, &y2, &w2, &x2);
  const double diff =
      std::max({MaxRelDiff(y1, y2), MaxRelDiff(w1, w2), MaxRelDiff(x1, x2)});
  const double gflop = 2.0 * n * in * out / 1e9;
  std::printf(
      "%-12s Gemm   fwd %7.4f  wgrad %7.4f  igrad %7.4f  total %7.4f ms"
      "  (%4.1f GFLOP/s)\n",
      name, ours.fwd, ours.wgrad, ours.igrad, ours.total(),
      3 * gflop / ours.total() * 1e3);
  std::printf(
      "%-12s sgemm  fwd %7.4f  wgrad %7.4f  igrad %7.4f  total %7.4f ms"
      "  max rel diff %.1e%s\n",
      "", blas.fwd, blas.wgrad, blas.igrad, blas.total(), diff,
      diff > 1e-4 ? "  MISMATCH" : "");
  g_mismatch |= diff > 1e-4;
}

// Whether the case `name` is selected by the command line's filter.
bool Selected(const std::string& filter, const std::string& name) {
  return filter.empty() || name.find(filter) != std::string::npos;
}

// The seed models' convolutions: 1-16 channels.
void BenchSeedShapes(const std::string& filter) {
  const struct {
    const char* name;
    ConvGeometry g;
    bool need_input;
  } seeds[] = {
      {"cifar conv1", Conv2(100, 3, 32, 6, 5, 0), false},
      {"cifar conv2", Conv2(100, 6, 14, 16, 5, 0), true},
      {"mnist conv1", Conv2(64, 1, 28, 6, 5, 2), false},
      {"mnist conv2", Conv2(64, 6, 14, 16, 5, 0), true},
      {"conv1d 1", Conv1(4, 3, 10000, 16, 3, 1), false},
      {"conv1d 2", Conv1(4, 16, 10000, 32, 3, 1), true},
      {"conv1d 3", Conv1(4, 32, 10000, 3, 3, 1), true},
  };
  for (const auto& s : seeds) {
    if (Selected(filter, s.name)) BenchConv(s.name, s.g, s.need_input, 15);
  }
}

// ResNet-18 in the CIFAR layout (batch 32) and torchvision's ResNet-50 at
// 224 (batch 8): the widths where oneDNN's blocked kernels compete.
void BenchResNetShapes(const std::string& filter) {
  struct Shape {
    const char* name;
    ConvGeometry g;
    bool need_input;
  };
  const Shape resnet[] = {
      {"c32 3-64", Conv2(32, 3, 32, 64, 3, 1), false},
      {"c32 16-16", Conv2(32, 16, 32, 16, 3, 1), true},
      {"c32 32-32", Conv2(32, 32, 32, 32, 3, 1), true},
      {"c32 64-64", Conv2(32, 64, 32, 64, 3, 1), true},
      {"c32 64-128s2", Strided(Conv2(32, 64, 32, 128, 3, 1), 2), true},
      {"c16 128-128", Conv2(32, 128, 16, 128, 3, 1), true},
      {"c8 256-256", Conv2(32, 256, 8, 256, 3, 1), true},
      {"c4 512-512", Conv2(32, 512, 4, 512, 3, 1), true},
      // torchvision's ResNet-18 on 32x32 inputs: after its stem and pool.
      {"t8 64-64", Conv2(32, 64, 8, 64, 3, 1), true},
      {"t8 64-128s2", Strided(Conv2(32, 64, 8, 128, 3, 1), 2), true},
      {"t4 128-128", Conv2(32, 128, 4, 128, 3, 1), true},
      {"t4 128-256s2", Strided(Conv2(32, 128, 4, 256, 3, 1), 2), true},
      {"c2 256-256", Conv2(32, 256, 2, 256, 3, 1), true},
      {"t2 256-512s2", Strided(Conv2(32, 256, 2, 512, 3, 1), 2), true},
      {"c1 512-512", Conv2(32, 512, 1, 512, 3, 1), true},
      {"b16 t2 256-512s2", Strided(Conv2(16, 256, 2, 512, 3, 1), 2), true},
      {"b16 c1 512-512", Conv2(16, 512, 1, 512, 3, 1), true},
      {"i224 stem", Strided(Conv2(8, 3, 224, 64, 7, 3), 2), false},
      {"i56 64-64", Conv2(8, 64, 56, 64, 3, 1), true},
      {"i56 256-64", Conv2(8, 256, 56, 64, 1, 0), true},
      {"i56 64-256", Conv2(8, 64, 56, 256, 1, 0), true},
      {"i56 128-128s2", Strided(Conv2(8, 128, 56, 128, 3, 1), 2), true},
      {"i28 128-128", Conv2(8, 128, 28, 128, 3, 1), true},
      {"i14 256-256", Conv2(8, 256, 14, 256, 3, 1), true},
      {"i14 1024-256", Conv2(8, 1024, 14, 256, 1, 0), true},
      {"i7 512-512", Conv2(8, 512, 7, 512, 3, 1), true},
      {"i7 2048-512", Conv2(8, 2048, 7, 512, 1, 0), true},
  };
  for (const Shape& s : resnet) {
    if (Selected(filter, s.name))
      BenchConv(s.name, s.g, s.need_input, 5, /*large=*/true);
  }
}

// MobileNetV2's depthwise 3x3 layers at 224 (batch 8), strided and not:
// kAuto against im2col per group.
void BenchDepthwiseShapes(const std::string& filter) {
  const struct {
    const char* name;
    int64_t channels, width, stride;
  } layers[] = {
      {"dw112 32", 32, 112, 1}, {"dw112 96s2", 96, 112, 2},
      {"dw56 144", 144, 56, 1}, {"dw56 144s2", 144, 56, 2},
      {"dw28 192", 192, 28, 1}, {"dw28 192s2", 192, 28, 2},
      {"dw14 384", 384, 14, 1}, {"dw14 576s2", 576, 14, 2},
      {"dw7 960", 960, 7, 1},
  };
  for (const auto& l : layers) {
    if (!Selected(filter, l.name)) continue;
    ConvGeometry g =
        Strided(Conv2(8, l.channels, l.width, l.channels, 3, 1), l.stride);
    g.groups = l.channels;
    BenchConv(l.name, g, /*need_input=*/true, 5, /*large=*/true);
  }
}

// ResNets' 3x3 stride-1 layers in evaluation, frozen or not: ResNet-50's
// at batch 1 and 8, CIFAR ResNet-18's at batch 1 and 32.
void BenchEvalShapes(const std::string& filter) {
  const struct {
    const char* name;
    int64_t width, channels;
    std::vector<int64_t> batches;
  } layers[] = {
      {"i56 64-64", 56, 64, {1, 8}},    {"i28 128-128", 28, 128, {1, 8}},
      {"i14 256-256", 14, 256, {1, 8}}, {"i7 512-512", 7, 512, {1, 8}},
      {"i32 64-64", 32, 64, {1, 32}},   {"i16 128-128", 16, 128, {1, 32}},
      {"i8 256-256", 8, 256, {1, 32}},  {"i4 512-512", 4, 512, {1, 32}}};
  for (bool frozen : {true, false}) {
    for (const auto& l : layers) {
      for (int64_t batch : l.batches) {
        const std::string name =
            std::string(frozen ? "eval " : "eval-unfrozen ") + l.name + " b" +
            std::to_string(batch);
        if (!Selected(filter, name)) continue;
        BenchScaled(name.c_str(),
                    Conv2(batch, l.channels, l.width, l.channels, 3, 1), frozen,
                    batch == 1 ? 40 : 10);
      }
    }
  }
}

// Dense layers: the seed models' small products and gpt_tiny's
// position-wise products over a batch of 8 x 256 tokens.
void BenchLinearShapes(const std::string& filter) {
  const struct {
    const char* name;
    int64_t n, in, out;
    int reps;
  } linear[] = {
      {"fc 400-120", 100, 400, 120, 200},
      {"fc 120-84", 100, 120, 84, 200},
      {"fc 84-10", 100, 84, 10, 200},
      {"mlp 100-200", 10, 100, 200, 2000},
      {"mlp 200-10", 10, 200, 10, 2000},
      {"gpt qkv 256-768", 2048, 256, 768, 10},
      {"gpt proj 256-256", 2048, 256, 256, 10},
      {"gpt fc 256-1024", 2048, 256, 1024, 10},
      {"gpt fc2 1024-256", 2048, 1024, 256, 10},
  };
  for (const auto& s : linear) {
    if (Selected(filter, s.name)) BenchLinear(s.name, s.n, s.in, s.out, s.reps);
  }
}

// A 1x1 weight gradient out of oneDNN's OI16i16o into OI: oneDNN's reorder
// against FromBlockedWeights, which must place every value alike.
void BenchWeightLayouts(const std::string& filter) {
  const struct {
    int64_t out, in, k;
  } shapes[] = {{256, 64, 1}, {2048, 512, 1}, {512, 2048, 1}, {1024, 256, 1}};
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  for (const auto& w : shapes) {
    const std::string name = "weights " + std::to_string(w.out) + "x" +
                             std::to_string(w.in) + "x" + std::to_string(w.k) +
                             "x" + std::to_string(w.k);
    if (!Selected(filter, name)) continue;
    const dnnl::memory::dims dims = {w.out, w.in, w.k, w.k};
    const int64_t n = w.out * w.in * w.k * w.k;
    std::vector<float> blocked(n), a(n), b(n);
    for (int64_t i = 0; i < n; ++i) blocked[i] = static_cast<float>(i % 977);
    dnnl::memory from({dims, dnnl::memory::data_type::f32,
                       dnnl::memory::format_tag::ABcd16b16a},
                      engine, blocked.data());
    dnnl::memory to(
        {dims, dnnl::memory::data_type::f32, dnnl::memory::format_tag::abcd},
        engine, a.data());
    dnnl::reorder reorder(from, to);
    const double onednn = MedianMs(
        [&] {
          reorder.execute(stream, from, to);
          stream.wait();
        },
        20);
    const double ours = MedianMs(
        [&] { FromBlockedWeights(blocked.data(), w.out, w.in, 16, b.data()); },
        20);
    const bool same = a == b;
    std::printf("%-26s onednn reorder %7.3f  cohort %7.3f ms  (%.2fx)%s\n",
                name.c_str(), onednn, ours, onednn / ours,
                same ? "" : "  MISMATCH");
    g_mismatch |= !same;
  }
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  using namespace cohort;
  // One compute thread unless a second argument asks for more; OpenBLAS
  // always runs on the caller, as in the engine.
  openblas_set_num_threads(1);
  long threads = 1;
  if (argc > 2) {
    char* end = nullptr;
    threads = std::strtol(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0' || threads < 1 || threads > 1024) {
      std::fprintf(stderr,
                   "conv_bench: the thread count must be a whole number from "
                   "1 to 1024, got \"%s\"\n",
                   argv[2]);
      return 2;
    }
  }
  SetOnednnThreads(static_cast<int>(threads));
  // An optional argument selects the cases whose name contains it.
  const std::string filter = argc > 1 ? argv[1] : "";
  BenchSeedShapes(filter);
  BenchResNetShapes(filter);
  BenchDepthwiseShapes(filter);
  BenchEvalShapes(filter);
  BenchLinearShapes(filter);
  BenchWeightLayouts(filter);
  if (g_mismatch) {
    std::printf("MISMATCH: the algorithms disagree beyond 1e-4 relative\n");
    return 1;
  }
  return 0;
}

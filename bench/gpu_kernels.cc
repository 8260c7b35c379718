// Bandwidth of cohort's flat CUDA kernels against the device's own copy
// bandwidth, measured in the same run: each kernel's bytes read and
// written per second, as a fraction of cudaMemcpy device-to-device on the
// same buffer size. Every bandwidth-bound kernel of kernels/cuda/ops.h,
// loss.h and reduce.h is timed: the fused optimizers, scaling and replica
// sums, bias + activation forward and backward (with the bias gradient),
// the 16-bit casts, dropout, softmax cross-entropy and the reductions.
//
// The fused optimizers (SGD with momentum, Adam) must reach at least 85% of
// the copy bandwidth (the target): the benchmark exits 1 otherwise;
// the other kernels are reported only. Without a CUDA device it says so and
// exits 0, having measured nothing.
//   gpu_kernels [--mib=256] [--repeats=20] [--device=0]
//
// Bytes per element count what a kernel must move at the least: each
// operand read or written once (4 bytes a float, 2 a 16-bit value, 1 a
// dropout mask byte); small vectors (biases, per-row results) are left out.
//
// Then the tiled attention kernels (kernels/cuda/attention.h), forward and
// backward, causal and bidirectional, at N = 8, H = 8, L = 1024, head dim
// 64 (--attention=false skips them): milliseconds, TFLOP/s of the matrix
// products (forward 2, backward 4 of 2 N H L^2 dh flops, halved when
// causal), and the device memory the calls use beside the L x L score
// matrix a plain implementation would hold.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/reduce.h"

ABSL_FLAG(int, mib, 256, "buffer size per operand, MiB");
ABSL_FLAG(int, repeats, 20, "timed runs per kernel (the median is reported)");
ABSL_FLAG(int, device, 0, "CUDA device");
ABSL_FLAG(bool, attention, true,
          "also time the attention kernels (N=8, H=8, L=1024, dh=64)");

namespace cohort {
namespace {

struct Result {
  std::string name;
  double bytes_per_element = 0;
  double gbps = 0;       // 0: the kernel failed (the error was printed)
  bool checked = false;  // held to kMinOptimizerRatio of the copy
};

constexpr double kMinOptimizerRatio = 0.85;

// Median seconds of `repeats` runs of `fn`, timed with events on `stream`;
// -1 (after printing why) when a run fails.
double TimeIt(cudaStream_t stream, int repeats, const std::string& name,
              const std::function<absl::Status()>& fn) {
  cudaEvent_t start, stop;
  if (!CudaStatus(cudaEventCreate(&start), "cudaEventCreate").ok() ||
      !CudaStatus(cudaEventCreate(&stop), "cudaEventCreate").ok()) {
    return -1;
  }
  std::vector<double> times;
  absl::Status s = fn();  // warm-up
  if (s.ok()) s = CudaStatus(cudaStreamSynchronize(stream), "warm-up");
  for (int r = 0; s.ok() && r < repeats; ++r) {
    cudaEventRecord(start, stream);
    s = fn();
    cudaEventRecord(stop, stream);
    if (s.ok()) s = CudaStatus(cudaEventSynchronize(stop), "timed run");
    float ms = 0;
    if (s.ok()) {
      s = CudaStatus(cudaEventElapsedTime(&ms, start, stop),
                     "cudaEventElapsedTime");
    }
    times.push_back(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(),
                 std::string(s.message()).c_str());
    return -1;
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Device memory for the whole run, freed at exit.
class Arena {
 public:
  ~Arena() {
    for (void* p : blocks_) cudaFree(p);
  }
  // `bytes` zeroed bytes, or null (after printing why).
  void* Get(size_t bytes, const char* what) {
    void* p = nullptr;
    const absl::Status s =
        CudaStatus(cudaMalloc(&p, bytes),
                   absl::StrCat("cudaMalloc of ", bytes, " bytes for ", what));
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return nullptr;
    }
    blocks_.push_back(p);
    cudaMemset(p, 0, bytes);
    return p;
  }

 private:
  std::vector<void*> blocks_;
};

// Every timed kernel over n-element operands (n floats per operand).
struct Buffers {
  int64_t n = 0;
  float *p = nullptr, *g = nullptr, *a = nullptr, *b = nullptr, *c = nullptr;
  uint8_t* mask = nullptr;
  int32_t* labels = nullptr;  // n / 10, all 0 (valid for any class count)
  float* scalars = nullptr;   // reduction results, per-row / column sums
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

bool Allocate(Arena& arena, int64_t n, Buffers* x) {
  x->n = n;
  for (float** f : {&x->p, &x->g, &x->a, &x->b, &x->c}) {
    *f = static_cast<float*>(arena.Get(n * sizeof(float), "an operand"));
    if (*f == nullptr) return false;
  }
  x->mask = static_cast<uint8_t*>(arena.Get(n, "a dropout mask"));
  x->labels = static_cast<int32_t*>(
      arena.Get((n / 10 + 1) * sizeof(int32_t), "labels"));
  // Room for per-row results of the narrowest layouts used below.
  x->scalars =
      static_cast<float*>(arena.Get((n / 10 + 1024) * sizeof(float), "sums"));
  // Cross-entropy takes the most: 12 bytes per row, at most n / 10 rows.
  x->workspace_bytes = std::max<size_t>(
      ReduceWorkspaceBytes(n), SoftmaxCrossEntropyWorkspaceBytes(n / 10 + 1));
  x->workspace = arena.Get(x->workspace_bytes, "a workspace");
  return x->mask != nullptr && x->labels != nullptr && x->scalars != nullptr &&
         x->workspace != nullptr;
}

// Softmax cross-entropy over n / c rows of c >= 10 classes; every label is
// 0, valid for any c (a label out of range would take another path).
absl::Status CrossEntropy(const Buffers& x, int64_t c, cudaStream_t s) {
  CudaCrossEntropyBuffers buf;
  buf.logits = x.p;
  buf.labels = x.labels;
  buf.loss = x.scalars;
  buf.grad = x.a;
  buf.correct = reinterpret_cast<int64_t*>(x.scalars + 2);
  buf.workspace = x.workspace;
  buf.workspace_bytes = x.workspace_bytes;
  return SoftmaxCrossEntropyAsync(buf, x.n / c, c, s);
}

// Times kernels over one set of buffers and keeps their results in the
// order they ran. Single-threaded; borrows the buffers and the stream.
class KernelTimer {
 public:
  KernelTimer(const Buffers& x, cudaStream_t s, int repeats)
      : x_(x), s_(s), repeats_(repeats) {}

  // Times `fn`, which moves `bytes` per element; `checked`: held to
  // kMinOptimizerRatio of the copy.
  void Run(const std::string& name, double bytes, bool checked,
           const std::function<absl::Status()>& fn) {
    const double t = TimeIt(s_, repeats_, name, fn);
    results_.push_back(
        {name, bytes, t > 0 ? bytes * x_.n / t / 1e9 : 0, checked});
  }

  const Buffers& x() const { return x_; }
  cudaStream_t stream() const { return s_; }
  std::vector<Result> TakeResults() { return std::move(results_); }

 private:
  const Buffers& x_;
  const cudaStream_t s_;
  const int repeats_;
  std::vector<Result> results_;
};

// The optimizers: the 85% check.
void MeasureOptimizers(KernelTimer& timer) {
  const Buffers& x = timer.x();
  const int64_t n = x.n;
  cudaStream_t s = timer.stream();
  gpu::SgdOptions momentum;
  momentum.momentum = 0.9;
  timer.Run("sgd momentum (p, g, b -> p, b)", 20, true,
            [&] { return gpu::SgdStep(x.p, x.g, x.a, n, 1e-3, momentum, s); });
  int64_t step = 0;
  timer.Run("adam (p, g, m, v -> p, m, v)", 28, true, [&] {
    return gpu::AdamStep(x.p, x.g, x.a, x.b, n, 1e-3, ++step,
                         gpu::AdamOptions(), s);
  });
  gpu::AdamOptions adamw;
  adamw.decoupled = true;
  adamw.weight_decay = 0.01;
  timer.Run("adamw (p, g, m, v -> p, m, v)", 28, false, [&] {
    return gpu::AdamStep(x.p, x.g, x.a, x.b, n, 1e-3, ++step, adamw, s);
  });
  timer.Run("sgd (p, g -> p)", 12, false, [&] {
    return gpu::SgdStep(x.p, x.g, nullptr, n, 1e-3, gpu::SgdOptions(), s);
  });
}

// Gradient averaging.
void MeasureAveraging(KernelTimer& timer) {
  const Buffers& x = timer.x();
  const int64_t n = x.n;
  cudaStream_t s = timer.stream();
  timer.Run("scale in place (y -> y)", 8, false,
            [&] { return gpu::ScaleInPlace(x.g, n, 0.5f, s); });
  const float* two[] = {x.p, x.g};
  timer.Run("sum 2 replicas scaled (a, b -> out)", 12, false,
            [&] { return gpu::SumScaled(two, 2, n, 0.5f, x.a, s); });
  const float* four[] = {x.p, x.g, x.b, x.c};
  timer.Run("sum 4 replicas scaled (a, b, c, d -> out)", 20, false,
            [&] { return gpu::SumScaled(four, 4, n, 0.25f, x.a, s); });
}

// Bias + activation: dense {N, 1024} and convolution-like {64, N*H*W}.
void MeasureBiasActivation(KernelTimer& timer) {
  const Buffers& x = timer.x();
  const int64_t n = x.n;
  cudaStream_t s = timer.stream();
  const int64_t cols = 1024, rows = n / cols;
  const int64_t channels = 64, spatial = n / channels;
  timer.Run("bias+relu forward, per column (x -> y)", 8, false, [&] {
    return gpu::BiasActivationForward(x.p, x.scalars, rows, cols,
                                      gpu::BiasLayout::kPerColumn,
                                      gpu::Activation::kRelu, x.a, s);
  });
  timer.Run("bias+relu forward, per row (x -> y)", 8, false, [&] {
    return gpu::BiasActivationForward(x.p, x.scalars, channels, spatial,
                                      gpu::BiasLayout::kPerRow,
                                      gpu::Activation::kRelu, x.a, s);
  });
  timer.Run("relu backward + bias grad, per column (y, dy -> dx)", 12, false,
            [&] {
              return gpu::BiasActivationBackward(
                  x.p, x.g, rows, cols, gpu::BiasLayout::kPerColumn,
                  gpu::Activation::kRelu, x.a, x.scalars, s);
            });
  timer.Run("relu backward + bias grad, per row (y, dy -> dx)", 12, false, [&] {
    return gpu::BiasActivationBackward(
        x.p, x.g, channels, spatial, gpu::BiasLayout::kPerRow,
        gpu::Activation::kRelu, x.a, x.scalars, s);
  });
}

// Casts (into and out of the 16-bit half of c), then dropout.
void MeasureCastsAndDropout(KernelTimer& timer) {
  const Buffers& x = timer.x();
  const int64_t n = x.n;
  cudaStream_t s = timer.stream();
  uint16_t* half = reinterpret_cast<uint16_t*>(x.c);
  timer.Run("float -> bf16", 6, false,
            [&] { return gpu::FloatToBf16(x.p, half, n, s); });
  timer.Run("bf16 -> float", 6, false,
            [&] { return gpu::Bf16ToFloat(half, x.a, n, s); });
  timer.Run("float -> fp16", 6, false,
            [&] { return gpu::FloatToFp16(x.p, half, n, s); });
  timer.Run("fp16 -> float", 6, false,
            [&] { return gpu::Fp16ToFloat(half, x.a, n, s); });

  timer.Run("dropout forward + mask (x -> y, mask)", 9, false, [&] {
    return gpu::DropoutForward(x.p, x.a, x.mask, n, 0.5, 1, 0, s);
  });
  timer.Run("dropout forward (x -> y)", 8, false, [&] {
    return gpu::DropoutForward(x.p, x.a, nullptr, n, 0.5, 1, 0, s);
  });
  timer.Run("dropout backward (dy -> dx)", 8, false,
            [&] { return gpu::DropoutBackward(x.g, x.a, n, 0.5, 1, 0, s); });
}

// Softmax cross-entropy (logits read, gradient written), then the
// reductions (one read of the input).
void MeasureLossAndReductions(KernelTimer& timer) {
  const Buffers& x = timer.x();
  const int64_t n = x.n;
  cudaStream_t s = timer.stream();
  timer.Run("softmax cross-entropy, 1000 classes (logits -> grad)", 8, false,
            [&] { return CrossEntropy(x, 1000, s); });
  timer.Run("softmax cross-entropy, 10 classes (logits -> grad)", 8, false,
            [&] { return CrossEntropy(x, 10, s); });

  timer.Run("sum", 4, false, [&] {
    return SumAsync(x.p, n, x.scalars, x.workspace, x.workspace_bytes, s);
  });
  timer.Run("sum of squares", 4, false, [&] {
    return SumSquaresAsync(x.p, n, x.scalars, x.workspace, x.workspace_bytes,
                           s);
  });
  timer.Run("max abs", 4, false, [&] {
    return MaxAbsAsync(x.p, n, x.scalars, x.workspace, x.workspace_bytes, s);
  });
  const int64_t cols = 1024, rows = n / cols;
  const int64_t channels = 64, spatial = n / channels;
  timer.Run("column sums {N, 1024}", 4, false,
            [&] { return ColumnSumsAsync(x.p, rows, cols, x.scalars, s); });
  timer.Run("row sums {64, N*H*W}", 4, false,
            [&] { return RowSumsAsync(x.p, channels, spatial, x.scalars, s); });
}

// Every kernel, the device copy first (Main divides by results[0]).
std::vector<Result> Measure(const Buffers& x, cudaStream_t s, int repeats) {
  KernelTimer timer(x, s, repeats);
  timer.Run("copy (device to device)", 8, false, [&] {
    return CudaStatus(
        cudaMemcpyAsync(x.a, x.p, x.n * 4, cudaMemcpyDeviceToDevice, s),
        "copy");
  });
  MeasureOptimizers(timer);
  MeasureAveraging(timer);
  MeasureBiasActivation(timer);
  MeasureCastsAndDropout(timer);
  MeasureLossAndReductions(timer);
  return timer.TakeResults();
}

// The attention kernels' forward and backward at N = 8, H = 8,
// L = 1024, head dim 64.
void MeasureAttention(cudaStream_t s, int repeats) {
  constexpr int64_t kN = 8, kH = 8, kL = 1024, kDh = 64;
  constexpr int64_t kD = kH * kDh;
  Arena arena;
  const int64_t qkv_floats = kN * 3 * kD * kL, out_floats = kN * kD * kL;
  const int64_t rows = kN * kH * kL;
  auto* qkv = static_cast<float*>(arena.Get(qkv_floats * 4, "qkv"));
  auto* grad_qkv = static_cast<float*>(arena.Get(qkv_floats * 4, "grad qkv"));
  auto* out = static_cast<float*>(arena.Get(out_floats * 4, "out"));
  auto* grad_out = static_cast<float*>(arena.Get(out_floats * 4, "grad out"));
  auto* lse = static_cast<float*>(arena.Get(rows * 4, "lse"));
  auto* delta = static_cast<float*>(arena.Get(rows * 4, "delta"));
  if (!qkv || !grad_qkv || !out || !grad_out || !lse || !delta) return;
  // Values of order 1 (the scores then span a few units, as trained ones).
  std::vector<float> host(qkv_floats);
  uint32_t state = 1;
  for (float& v : host) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / 8388608.0f - 1.0f;
  }
  cudaMemcpy(qkv, host.data(), qkv_floats * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(grad_out, host.data(), out_floats * 4, cudaMemcpyHostToDevice);
  const double mib = 1.0 / (1 << 20);
  std::printf(
      "attention N=%lld H=%lld L=%lld dh=%lld, {N, 3D, L} layout, median of "
      "%d runs\n",
      static_cast<long long>(kN), static_cast<long long>(kH),
      static_cast<long long>(kL), static_cast<long long>(kDh), repeats);
  std::printf(
      "device memory: qkv %.1f MiB, out %.1f MiB, lse + delta %.2f MiB "
      "(forward keeps qkv, out, lse: %.1f MiB; backward adds grad_out, "
      "grad_qkv, delta); the L x L probabilities would be %.1f MiB\n\n",
      qkv_floats * 4 * mib, out_floats * 4 * mib, 2 * rows * 4 * mib,
      (qkv_floats + out_floats + rows) * 4 * mib,
      static_cast<double>(kN * kH * kL * kL) * 4 * mib);
  std::printf(
      "| mask | forward ms | forward TFLOP/s | backward ms | "
      "backward TFLOP/s |\n|---|---|---|---|---|\n");
  for (const bool causal : {true, false}) {
    const gpu::AttentionGeometry g =
        gpu::SampleMajorAttention(kN, kL, kH, kDh, causal);
    const double fwd = TimeIt(s, repeats, "attention forward", [&] {
      return gpu::AttentionForward(g, qkv, out, lse, s);
    });
    const double bwd = TimeIt(s, repeats, "attention backward", [&] {
      return gpu::AttentionBackward(g, qkv, out, grad_out, lse, delta, grad_qkv,
                                    s);
    });
    const double product = 2.0 * kN * kH * kL * kL * kDh * (causal ? 0.5 : 1);
    std::printf("| %s | %.3f | %.2f | %.3f | %.2f |\n",
                causal ? "causal" : "bidirectional", fwd * 1e3,
                fwd > 0 ? 2 * product / fwd / 1e12 : 0, bwd * 1e3,
                bwd > 0 ? 4 * product / bwd / 1e12 : 0);
  }
  std::printf("\n");
}

int Main() {
  const CudaDevices found = FindCudaDevices();
  if (found.names.empty()) {
    std::printf("SKIP: no CUDA device (%s); nothing measured\n",
                found.reason.c_str());
    return 0;
  }
  const int device = absl::GetFlag(FLAGS_device);
  if (device < 0 || device >= static_cast<int>(found.names.size())) {
    std::fprintf(stderr, "--device=%d: this machine has %zu CUDA device(s)\n",
                 device, found.names.size());
    return 1;
  }
  if (!CudaStatus(cudaSetDevice(device), "cudaSetDevice").ok()) return 1;
  const int64_t n = int64_t{absl::GetFlag(FLAGS_mib)} << 18;  // floats
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  if (n < 1024 * 64) {
    std::fprintf(stderr, "--mib must be at least 1\n");
    return 1;
  }
  Arena arena;
  Buffers x;
  if (!Allocate(arena, n, &x)) return 1;
  cudaStream_t s;
  if (!CudaStatus(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                  "cudaStreamCreate")
           .ok()) {
    return 1;
  }
  const std::vector<Result> results = Measure(x, s, repeats);

  const double copy = results[0].gbps;
  std::printf("device %d (%s), %d MiB per operand, median of %d runs\n\n",
              device, found.names[device].c_str(), absl::GetFlag(FLAGS_mib),
              repeats);
  std::printf(
      "| kernel | bytes/element | GB/s | vs copy |\n|---|---|---|---|\n");
  for (const Result& r : results) {
    if (r.gbps > 0) {
      std::printf("| %s | %.0f | %.1f | %.2f |\n", r.name.c_str(),
                  r.bytes_per_element, r.gbps, copy > 0 ? r.gbps / copy : 0);
    } else {
      std::printf("| %s | %.0f | failed | - |\n", r.name.c_str(),
                  r.bytes_per_element);
    }
  }
  std::printf("\n");
  if (absl::GetFlag(FLAGS_attention)) MeasureAttention(s, repeats);
  cudaStreamDestroy(s);
  bool ok = copy > 0;
  if (!ok) std::printf("FAIL: the device copy itself could not be timed\n");
  for (const Result& r : results) {
    if (!r.checked) continue;
    const double ratio = copy > 0 ? r.gbps / copy : 0;
    const bool pass = ratio >= kMinOptimizerRatio;
    ok &= pass;
    std::printf("%s: %s at %.2f of the copy bandwidth (need %.2f)\n",
                pass ? "PASS" : "FAIL", r.name.c_str(), ratio,
                kMinOptimizerRatio);
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return cohort::Main();
}

// Bandwidth of cohort's CUDA kernels against the device's own copy
// bandwidth, measured in the same run: each kernel's bytes read and
// written per second, as a fraction of cudaMemcpy device-to-device on the
// same buffer size. Checks that the fused optimizers (SGD with momentum,
// Adam) reach at least 85% of the copy bandwidth (the target) and
// exits 1 otherwise; without a CUDA device it says so and exits 0, having
// measured nothing.
//   gpu_kernels [--mib=256] [--repeats=20] [--device=0]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"

ABSL_FLAG(int, mib, 256, "buffer size per operand, MiB");
ABSL_FLAG(int, repeats, 20, "timed runs per kernel (the median is reported)");
ABSL_FLAG(int, device, 0, "CUDA device");

namespace cohort {
namespace {

struct Result {
  std::string name;
  double bytes_per_element;
  double gbps = 0;
};

// Median seconds of `repeats` runs of `fn`, timed with events on `stream`.
double TimeIt(cudaStream_t stream, int repeats,
              const std::function<absl::Status()>& fn) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  (void)fn();  // warm-up
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    cudaEventRecord(start, stream);
    absl::Status s = fn();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return -1;
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

int Main() {
  const CudaDevices found = FindCudaDevices();
  if (found.names.empty()) {
    std::printf("SKIP: no CUDA device (%s); nothing measured\n",
                found.reason.c_str());
    return 0;
  }
  const int device = absl::GetFlag(FLAGS_device);
  cudaSetDevice(device);
  const int64_t n = int64_t{absl::GetFlag(FLAGS_mib)} << 18;  // floats
  const int repeats = absl::GetFlag(FLAGS_repeats);
  float *p, *g, *a, *b, *c;
  for (float** x : {&p, &g, &a, &b, &c}) {
    if (!CudaStatus(cudaMalloc(reinterpret_cast<void**>(x), n * 4),
                    "cudaMalloc")
             .ok()) {
      std::fprintf(stderr, "cannot allocate 5 x %d MiB\n",
                   absl::GetFlag(FLAGS_mib));
      return 1;
    }
    cudaMemset(*x, 0, n * 4);
  }
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  std::vector<Result> results;
  auto run = [&](const char* name, double bytes,
                 const std::function<absl::Status()>& fn) {
    const double t = TimeIt(s, repeats, fn);
    results.push_back({name, bytes, t > 0 ? bytes * n / t / 1e9 : 0});
  };
  run("copy (device to device)", 8, [&] {
    return CudaStatus(cudaMemcpyAsync(a, p, n * 4, cudaMemcpyDeviceToDevice, s),
                      "copy");
  });
  gpu::SgdOptions sgd;
  sgd.momentum = 0.9;
  run("sgd momentum (p, g, b -> p, b)", 20,
      [&] { return gpu::SgdStep(p, g, a, n, 1e-3, sgd, s); });
  int64_t step = 0;
  run("adam (p, g, m, v -> p, m, v)", 28, [&] {
    return gpu::AdamStep(p, g, a, b, n, 1e-3, ++step, gpu::AdamOptions(), s);
  });
  run("scale in place", 8, [&] { return gpu::ScaleInPlace(g, n, 0.5f, s); });
  run("float -> bf16", 6, [&] {
    return gpu::FloatToBf16(p, reinterpret_cast<uint16_t*>(c), n, s);
  });
  const double copy = results[0].gbps;
  std::printf("device %d (%s), %d MiB per operand, median of %d runs\n\n",
              device, found.names[device].c_str(), absl::GetFlag(FLAGS_mib),
              repeats);
  std::printf(
      "| kernel | bytes/element | GB/s | vs copy |\n|---|---|---|---|\n");
  for (const Result& r : results) {
    std::printf("| %s | %.0f | %.1f | %.2f |\n", r.name.c_str(),
                r.bytes_per_element, r.gbps, copy > 0 ? r.gbps / copy : 0);
  }
  bool ok = copy > 0;
  for (size_t i : {size_t{1}, size_t{2}}) {
    const double ratio = copy > 0 ? results[i].gbps / copy : 0;
    const bool pass = ratio >= 0.85;
    ok &= pass;
    std::printf("%s: %s at %.2f of the copy bandwidth (need 0.85)\n",
                pass ? "PASS" : "FAIL", results[i].name.c_str(), ratio);
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return cohort::Main();
}

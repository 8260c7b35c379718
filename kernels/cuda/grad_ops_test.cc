// The clipping and accumulation kernels against the CPU engine's arithmetic
// (written out here in double: kernels/ may not depend on worker/), on a GPU;
// skipped, naming why, elsewhere. Argument checks run everywhere.
#include "kernels/cuda/grad_ops.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/require_gpus.h"

namespace cohort {
namespace {

std::vector<float> Values(int64_t n) {
  std::vector<float> v(n);
  uint32_t s = 12345;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    v[i] = (static_cast<float>(s >> 8) / 16777216.0f - 0.5f) * 0.2f;
  }
  return v;
}

// Uploads `host`, runs `op` on the device copy, returns the result.
template <typename Op>
std::vector<float> OnDevice(const std::vector<float>& host, Op op) {
  float* g = nullptr;
  const size_t bytes = host.size() * sizeof(float);
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&g), bytes), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(g, host.data(), bytes, cudaMemcpyHostToDevice),
            cudaSuccess);
  // A pageable copy may still be landing when cudaMemcpy returns.
  cudaDeviceSynchronize();
  op(g);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> out(host.size());
  EXPECT_EQ(cudaMemcpy(out.data(), g, bytes, cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaFree(g);
  return out;
}

TEST(GpuClip, ClampMatchesTheCpuClamp) {
  REQUIRE_GPU();
  const std::vector<float> g = Values(100003);
  const std::vector<float> got = OnDevice(g, [&](float* d) {
    ASSERT_TRUE(gpu::ClampInPlace(d, g.size(), 0.03f, nullptr).ok());
  });
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_EQ(got[i], std::min(0.03f, std::max(-0.03f, g[i]))) << i;
  }
}

// The norm from the device's own sum of squares: a gradient far above
// max_norm scales to it, one below is left bit for bit.
TEST(GpuClip, ClipToNormScalesToTheNormOnlyAboveIt) {
  REQUIRE_GPU();
  const std::vector<float> g = Values(100003);
  double squares = 0;
  for (float x : g) squares += static_cast<double>(x) * x;
  const double norm = std::sqrt(squares);
  for (const double max_norm : {norm / 7, norm * 2}) {
    const std::vector<float> got = OnDevice(g, [&](float* d) {
      float* sum = nullptr;
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&sum), sizeof(float)),
                cudaSuccess);
      void* work = nullptr;
      const size_t work_bytes = ReduceWorkspaceBytes(g.size());
      ASSERT_EQ(cudaMalloc(&work, work_bytes), cudaSuccess);
      ASSERT_TRUE(
          SumSquaresAsync(d, g.size(), sum, work, work_bytes, nullptr).ok());
      ASSERT_TRUE(
          gpu::ClipToNormInPlace(d, g.size(), sum, max_norm, nullptr).ok());
      cudaDeviceSynchronize();
      cudaFree(sum);
      cudaFree(work);
    });
    const double scale = std::min(1.0, max_norm / (norm + 1e-6));
    double worst = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      worst = std::max(worst, std::abs(got[i] - g[i] * scale));
    }
    EXPECT_LE(worst, 1e-7) << "max_norm " << max_norm;  // |g| <= 0.1
    if (scale == 1.0) {
      EXPECT_EQ(got, g);
    }
  }
}

// Two batches of 3 and 5 samples joined to a third of 2, against the same
// float operations on the host (which may fuse a multiply-add, -mfma: so
// to a few units in the last place, not bit for bit).
TEST(GpuAccumulate, MatchesTheCpuArithmetic) {
  REQUIRE_GPU();
  const int64_t n = 70001;
  const std::vector<float> a = Values(n), b = OnDevice(a, [](float*) {});
  std::vector<float> c(n);
  for (int64_t i = 0; i < n; ++i) c[i] = a[(i * 7) % n] - a[(i * 3) % n];
  std::vector<float> want(n);
  for (int64_t i = 0; i < n; ++i) {
    float acc = 3.0f * a[i];
    acc += 5.0f * c[i];
    want[i] = (acc + 2.0f * a[(i * 11) % n]) * (1.0f / 10.0f);
  }
  std::vector<float> last(n);
  for (int64_t i = 0; i < n; ++i) last[i] = a[(i * 11) % n];
  float* acc = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&acc), n * sizeof(float)),
            cudaSuccess);
  std::vector<float> got = OnDevice(a, [&](float* d) {
    ASSERT_TRUE(gpu::AccumulateScaled(d, n, 3.0f, true, acc, nullptr).ok());
  });
  got = OnDevice(c, [&](float* d) {
    ASSERT_TRUE(gpu::AccumulateScaled(d, n, 5.0f, false, acc, nullptr).ok());
  });
  got = OnDevice(last, [&](float* d) {
    ASSERT_TRUE(
        gpu::FinishAccumulated(acc, n, 2.0f, 1.0f / 10.0f, d, nullptr).ok());
  });
  cudaFree(acc);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], want[i], 1e-7) << i;
  EXPECT_EQ(b, a);
}

TEST(GpuClip, BadArgumentsAreRefusedBeforeTheDevice) {
  float x = 0;
  EXPECT_FALSE(gpu::ClampInPlace(&x, 1, 0.0f, nullptr).ok());
  EXPECT_FALSE(gpu::ClampInPlace(nullptr, 4, 1.0f, nullptr).ok());
  EXPECT_FALSE(gpu::ClipToNormInPlace(&x, 1, nullptr, 1.0, nullptr).ok());
  EXPECT_FALSE(gpu::ClipToNormInPlace(&x, 1, &x, -1.0, nullptr).ok());
  EXPECT_FALSE(gpu::ClipToNormInPlace(&x, -1, &x, 1.0, nullptr).ok());
  EXPECT_FALSE(gpu::AccumulateScaled(&x, 1, 0.0f, true, &x, nullptr).ok());
  EXPECT_FALSE(gpu::AccumulateScaled(&x, 1, 1.0f, true, nullptr, nullptr).ok());
  EXPECT_FALSE(
      gpu::FinishAccumulated(nullptr, 1, 1.0f, 1.0f, &x, nullptr).ok());
}

}  // namespace
}  // namespace cohort

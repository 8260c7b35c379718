#include "kernels/cuda/device.h"

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(CudaDevices, NoDeviceComesWithAReason) {
  const CudaDevices d = FindCudaDevices();
  if (d.names.empty()) {
    EXPECT_FALSE(d.reason.empty());
  } else {
    EXPECT_TRUE(BuiltWithCuda());
  }
}

// Tagged "gpu": runs the kernel where a device exists, skips elsewhere.
TEST(CudaDevices, AxpyMatchesHost) {
  const CudaDevices d = FindCudaDevices();
  if (d.names.empty()) GTEST_SKIP() << "no CUDA device: " << d.reason;
  std::vector<float> x(1000), y(1000);
  for (int i = 0; i < 1000; ++i) {
    x[i] = i * 0.5f;
    y[i] = 1.0f - i;
  }
  std::vector<float> expect = y;
  for (int i = 0; i < 1000; ++i) expect[i] += 2.0f * x[i];
  ASSERT_TRUE(CudaAxpy(0, 2.0f, x, &y).ok());
  for (int i = 0; i < 1000; ++i) EXPECT_FLOAT_EQ(y[i], expect[i]);
}

}  // namespace
}  // namespace cohort

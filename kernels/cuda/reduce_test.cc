#include "kernels/cuda/reduce.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device.h"

namespace cohort {
namespace {

// Float32 results against double references: within 1e-5 of the sum of
// |x| (the scale of rounding error in any summation order).
constexpr double kRelTol = 1e-5;

// Device memory for one test; freed at scope exit.
class DeviceFloats {
 public:
  explicit DeviceFloats(size_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(&ptr_, bytes()), cudaSuccess);
  }
  explicit DeviceFloats(const std::vector<float>& host)
      : DeviceFloats(host.size()) {
    if (host.empty()) return;
    EXPECT_EQ(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(float),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    // A pageable copy may still be landing when cudaMemcpy returns.
    cudaDeviceSynchronize();
  }
  ~DeviceFloats() { cudaFree(ptr_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;

  float* get() { return static_cast<float*>(ptr_); }
  size_t bytes() const { return (n_ == 0 ? 1 : n_) * sizeof(float); }
  std::vector<float> ToHost() const {
    std::vector<float> out(n_);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr_, n_ * sizeof(float),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    return out;
  }

 private:
  size_t n_;
  void* ptr_ = nullptr;
};

// Deterministic values of both signs and varied magnitudes.
std::vector<float> TestValues(int64_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    const float unit = static_cast<float>(s >> 8) / 16777216.0f;  // [0, 1)
    v[i] = (unit - 0.4f) * (1 + static_cast<float>(i % 7));
  }
  return v;
}

class ReduceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const CudaDevices d = FindCudaDevices();
    if (d.names.empty()) GTEST_SKIP() << "no CUDA device: " << d.reason;
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
              cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  cudaStream_t stream_ = nullptr;
};

const int64_t kSizes[] = {0, 1, 255, 256, 1000, 2049, 1 << 20, (1 << 22) + 7};

TEST_F(ReduceTest, SumMatchesDouble) {
  for (int64_t n : kSizes) {
    const std::vector<float> x = TestValues(n, 1);
    double sum = 0, abs_sum = 0;
    for (float v : x) {
      sum += v;
      abs_sum += std::fabs(v);
    }
    DeviceFloats dx(x);
    absl::StatusOr<float> got = Sum(dx.get(), n, stream_);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_NEAR(*got, sum, kRelTol * abs_sum + 1e-30) << "n=" << n;
  }
}

TEST_F(ReduceTest, SumSquaresMatchesDouble) {
  for (int64_t n : kSizes) {
    const std::vector<float> x = TestValues(n, 2);
    double sum = 0;
    for (float v : x) sum += static_cast<double>(v) * v;
    DeviceFloats dx(x);
    absl::StatusOr<float> got = SumSquares(dx.get(), n, stream_);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_NEAR(*got, sum, kRelTol * sum + 1e-30) << "n=" << n;
  }
}

TEST_F(ReduceTest, MaxAbsIsExact) {
  for (int64_t n : kSizes) {
    std::vector<float> x = TestValues(n, 3);
    if (n > 0) x[n / 3] = -1000.5f;  // the largest magnitude is negative
    float expect = 0;
    for (float v : x) expect = std::max(expect, std::fabs(v));
    DeviceFloats dx(x);
    absl::StatusOr<float> got = MaxAbs(dx.get(), n, stream_);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, expect) << "n=" << n;
  }
}

TEST_F(ReduceTest, MaxAbsReportsNan) {
  std::vector<float> x = TestValues(5000, 4);
  x[4321] = std::numeric_limits<float>::quiet_NaN();
  DeviceFloats dx(x);
  absl::StatusOr<float> got = MaxAbs(dx.get(), x.size(), stream_);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(std::isnan(*got));
}

TEST_F(ReduceTest, AsyncVariantsWriteDeviceResultsDeterministically) {
  const int64_t n = 300001;
  const std::vector<float> x = TestValues(n, 5);
  DeviceFloats dx(x), out(6);
  const size_t ws_bytes = ReduceWorkspaceBytes(n);
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
  for (int rep = 0; rep < 2; ++rep) {
    ASSERT_TRUE(
        SumAsync(dx.get(), n, out.get() + 3 * rep, ws, ws_bytes, stream_).ok());
    ASSERT_TRUE(SumSquaresAsync(dx.get(), n, out.get() + 3 * rep + 1, ws,
                                ws_bytes, stream_)
                    .ok());
    ASSERT_TRUE(
        MaxAbsAsync(dx.get(), n, out.get() + 3 * rep + 2, ws, ws_bytes, stream_)
            .ok());
  }
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  cudaFree(ws);
  const std::vector<float> got = out.ToHost();
  double sum = 0, sq = 0, abs_sum = 0;
  float max_abs = 0;
  for (float v : x) {
    sum += v;
    sq += static_cast<double>(v) * v;
    abs_sum += std::fabs(v);
    max_abs = std::max(max_abs, std::fabs(v));
  }
  EXPECT_NEAR(got[0], sum, kRelTol * abs_sum);
  EXPECT_NEAR(got[1], sq, kRelTol * sq);
  EXPECT_EQ(got[2], max_abs);
  // Run-to-run: the same bits.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(std::memcmp(&got[i], &got[i + 3], sizeof(float)), 0) << i;
  }
}

TEST_F(ReduceTest, SmallWorkspaceIsRejected) {
  const int64_t n = 1 << 20;
  DeviceFloats dx(n), out(1);
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, 8), cudaSuccess);
  const absl::Status s = SumAsync(dx.get(), n, out.get(), ws, 8, stream_);
  cudaFree(ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(Sum(dx.get(), -1, stream_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Column and row sums of [rows, cols] against double sums, tolerance
// relative to each sum's |x|.
void ExpectMatrixSums(cudaStream_t stream, int64_t rows, int64_t cols) {
  const std::vector<float> x = TestValues(rows * cols, rows * 31 + cols);
  std::vector<double> col_sum(cols, 0), col_abs(cols, 0);
  std::vector<double> row_sum(rows, 0), row_abs(rows, 0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const float v = x[i * cols + j];
      col_sum[j] += v;
      col_abs[j] += std::fabs(v);
      row_sum[i] += v;
      row_abs[i] += std::fabs(v);
    }
  }
  DeviceFloats dx(x), dcol(cols), drow(rows);
  ASSERT_TRUE(ColumnSumsAsync(dx.get(), rows, cols, dcol.get(), stream).ok());
  ASSERT_TRUE(RowSumsAsync(dx.get(), rows, cols, drow.get(), stream).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const std::vector<float> got_col = dcol.ToHost(), got_row = drow.ToHost();
  for (int64_t j = 0; j < cols; ++j) {
    ASSERT_NEAR(got_col[j], col_sum[j], kRelTol * col_abs[j] + 1e-30)
        << "[" << rows << ", " << cols << "] column " << j;
  }
  for (int64_t i = 0; i < rows; ++i) {
    ASSERT_NEAR(got_row[i], row_sum[i], kRelTol * row_abs[i] + 1e-30)
        << "[" << rows << ", " << cols << "] row " << i;
  }
}

TEST_F(ReduceTest, ColumnAndRowSumsMatchDouble) {
  const int64_t shapes[][2] = {{1, 1},     {1, 1000}, {64, 10},   {257, 1001},
                               {1000, 33}, {5000, 3}, {3, 70000}, {0, 5}};
  for (const auto& s : shapes) ExpectMatrixSums(stream_, s[0], s[1]);
}

TEST_F(ReduceTest, ColumnSumsOfNoRowsAreZero) {
  DeviceFloats out(std::vector<float>(7, 42.0f));
  ASSERT_TRUE(ColumnSumsAsync(nullptr, 0, 7, out.get(), stream_).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  for (float v : out.ToHost()) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace cohort

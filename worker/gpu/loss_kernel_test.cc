// The fused softmax cross-entropy kernels (kernels/cuda/loss.h) against
// the CPU engine's loss (worker/loss.h). Here rather than beside the
// kernels because kernels/ may not depend on worker/. Skips without a GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/loss.h"
#include "worker/gpu/device_bytes.h"
#include "worker/loss.h"

namespace cohort {
namespace {

constexpr double kRelTol = 1e-5;

uint32_t Next(uint32_t* s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

// Logits from a few integer levels (so rows have tied maxima and the
// first-maximum rule matters) or continuous values up to +-30 (so the row
// maximum must be subtracted). Labels: the first maximum, a later tied
// maximum (wrong under the tie rule), or any class.
struct Batch {
  int64_t n, c;
  std::vector<float> logits;
  std::vector<int32_t> labels;
};

Batch MakeBatch(int64_t n, int64_t c, bool tied) {
  Batch b{n, c, std::vector<float>(n * c), std::vector<int32_t>(n)};
  uint32_t s = static_cast<uint32_t>(n * 7919 + c * 31 + tied);
  for (float& v : b.logits) {
    v = tied ? static_cast<float>(static_cast<int>(Next(&s) % 5) - 2)
             : (static_cast<float>(Next(&s)) / 16777216.0f - 0.5f) * 60.0f;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float* row = b.logits.data() + i * c;
    int64_t first = 0, last = 0;
    for (int64_t j = 1; j < c; ++j) {
      if (row[j] > row[first]) first = last = j;
      if (row[j] == row[first]) last = j;
    }
    const uint32_t pick = Next(&s) % 3;
    b.labels[i] = static_cast<int32_t>(pick == 0   ? first
                                       : pick == 1 ? last
                                                   : Next(&s) % c);
  }
  return b;
}

struct CpuResult {
  float loss;
  std::vector<float> grad;
  int64_t correct;
};

CpuResult RunCpu(const Batch& b, float smoothing = 0) {
  Tensor logits({b.n, b.c});
  std::copy(b.logits.begin(), b.logits.end(), logits.data());
  Tensor grad;
  int64_t correct = 0;
  const float loss =
      SoftmaxCrossEntropy<float>(logits, b.labels, &grad, &correct, smoothing);
  return {loss, std::vector<float>(grad.data(), grad.data() + grad.size()),
          correct};
}

struct GpuResult {
  absl::StatusOr<float> loss;
  std::vector<float> grad;
  int64_t correct;
};

// Runs the GPU loss on `b`, the counter starting at `correct_start`.
GpuResult RunGpu(const Batch& b, bool with_grad, cudaStream_t stream,
                 int64_t correct_start = 0, float smoothing = 0) {
  DeviceBytes logits(b.logits), labels(b.labels), loss(sizeof(float));
  DeviceBytes grad(b.logits.size() * sizeof(float));
  DeviceBytes correct(std::vector<int64_t>{correct_start});
  const size_t ws_bytes = SoftmaxCrossEntropyWorkspaceBytes(b.n);
  DeviceBytes ws(ws_bytes);
  CudaCrossEntropyBuffers buf;
  buf.logits = logits.as<float>();
  buf.labels = labels.as<int32_t>();
  buf.loss = loss.as<float>();
  buf.grad = with_grad ? grad.as<float>() : nullptr;
  buf.correct = correct.as<int64_t>();
  buf.workspace = ws.as<void>();
  buf.workspace_bytes = ws_bytes;
  buf.label_smoothing = smoothing;
  GpuResult r;
  r.loss = SoftmaxCrossEntropy(buf, b.n, b.c, stream);
  r.grad = grad.ToHost<float>(with_grad ? b.logits.size() : 0);
  r.correct = correct.ToHost<int64_t>(1)[0];
  return r;
}

class CudaLossTest : public ::testing::Test {
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

  void ExpectMatchesCpu(int64_t n, int64_t c, bool tied, float smoothing = 0) {
    SCOPED_TRACE("n=" + std::to_string(n) + " c=" + std::to_string(c) +
                 (tied ? " tied" : " continuous") +
                 " smoothing=" + std::to_string(smoothing));
    const Batch b = MakeBatch(n, c, tied);
    const CpuResult cpu = RunCpu(b, smoothing);
    const GpuResult gpu =
        RunGpu(b, /*with_grad=*/true, stream_, /*correct_start=*/0, smoothing);
    ASSERT_TRUE(gpu.loss.ok()) << gpu.loss.status();
    EXPECT_NEAR(*gpu.loss, cpu.loss, kRelTol * std::fabs(cpu.loss) + 1e-7);
    EXPECT_EQ(gpu.correct, cpu.correct);
    // The gradient is (softmax - onehot) * scale: errors scale with the
    // entry, except at the label, where softmax - 1 cancels, so the bound
    // adds 1e-5 of scale.
    const double scale = 1.0 / n;
    ASSERT_EQ(gpu.grad.size(), cpu.grad.size());
    for (size_t i = 0; i < cpu.grad.size(); ++i) {
      ASSERT_NEAR(gpu.grad[i], cpu.grad[i],
                  kRelTol * (std::fabs(cpu.grad[i]) + scale))
          << "row " << i / c << " column " << i % c;
    }
  }

  cudaStream_t stream_ = nullptr;
};

TEST_F(CudaLossTest, MatchesCpuOnManyShapes) {
  for (int64_t n : {1, 64, 257}) {
    for (int64_t c : {1, 10, 1000, 1001}) {
      ExpectMatchesCpu(n, c, /*tied=*/true);
      ExpectMatchesCpu(n, c, /*tied=*/false);
    }
  }
}

TEST_F(CudaLossTest, MatchesCpuForWideRows) {
  ExpectMatchesCpu(3, 100003, /*tied=*/false);
  ExpectMatchesCpu(2, 70000, /*tied=*/true);
}

TEST_F(CudaLossTest, MatchesCpuForManyRows) {
  ExpectMatchesCpu(70000, 10, /*tied=*/true);  // more rows than blocks
}

// Label smoothing: target (1 - e) onehot + e / c, loss (1 - e) nll + e
// mean_j nll_j, as worker/loss.cc (PyTorch's label_smoothing).
TEST_F(CudaLossTest, LabelSmoothingMatchesCpu) {
  for (float e : {0.1f, 0.5f, 0.9f}) {
    for (int64_t n : {1, 64, 257}) {
      for (int64_t c : {1, 10, 1001}) {
        ExpectMatchesCpu(n, c, /*tied=*/true, e);
        ExpectMatchesCpu(n, c, /*tied=*/false, e);
      }
    }
  }
  ExpectMatchesCpu(3, 100003, /*tied=*/false, 0.2f);
  ExpectMatchesCpu(70000, 10, /*tied=*/true, 0.2f);
}

// e = 0 runs the arithmetic of the kernel before smoothing existed: the
// same bits as a call that leaves the field at its default.
TEST_F(CudaLossTest, ZeroSmoothingIsPlainCrossEntropy) {
  const Batch b = MakeBatch(257, 1000, /*tied=*/false);
  const GpuResult plain = RunGpu(b, /*with_grad=*/true, stream_);
  const GpuResult zero = RunGpu(b, /*with_grad=*/true, stream_, 0, 0.0f);
  ASSERT_TRUE(plain.loss.ok() && zero.loss.ok());
  EXPECT_EQ(*plain.loss, *zero.loss);
  EXPECT_EQ(plain.grad, zero.grad);
  const GpuResult smoothed = RunGpu(b, /*with_grad=*/true, stream_, 0, 0.1f);
  ASSERT_TRUE(smoothed.loss.ok());
  EXPECT_NE(*smoothed.loss, *plain.loss);
  EXPECT_EQ(smoothed.correct, plain.correct);  // hits ignore smoothing
}

TEST_F(CudaLossTest, SmoothingOutsideZeroToOneIsRejected) {
  const Batch b = MakeBatch(4, 10, /*tied=*/false);
  for (float e : {-0.1f, 1.0f, std::nanf("")}) {
    const GpuResult gpu = RunGpu(b, /*with_grad=*/true, stream_, 0, e);
    EXPECT_EQ(gpu.loss.status().code(), absl::StatusCode::kInvalidArgument)
        << e << ": " << gpu.loss.status();
  }
}

TEST_F(CudaLossTest, TiesCountOnlyTheFirstMaximum) {
  // Row 0: max 3 at columns 1 and 2, label 1 (first): correct.
  // Row 1: same logits, label 2 (a later tie): wrong.
  // Row 2: all equal, label 0: correct.
  Batch b{3, 3, {0, 3, 3, 0, 3, 3, 5, 5, 5}, {1, 2, 0}};
  const GpuResult gpu = RunGpu(b, /*with_grad=*/false, stream_,
                               /*correct_start=*/10);
  ASSERT_TRUE(gpu.loss.ok()) << gpu.loss.status();
  EXPECT_EQ(gpu.correct, 12);  // accumulates, like the CPU's counter
  EXPECT_NEAR(*gpu.loss, RunCpu(b).loss, 1e-6);
}

TEST_F(CudaLossTest, LargeLogitsStayFinite) {
  Batch b{1, 3, {1000.0f, 999.0f, -1000.0f}, {1}};
  const GpuResult gpu = RunGpu(b, /*with_grad=*/true, stream_);
  ASSERT_TRUE(gpu.loss.ok()) << gpu.loss.status();
  EXPECT_NEAR(*gpu.loss, 1.0 + std::log1p(std::exp(-1.0)), 1e-5);
  for (float g : gpu.grad) EXPECT_TRUE(std::isfinite(g));
}

TEST_F(CudaLossTest, WithoutGradientGivesTheSameLossAndCount) {
  const Batch b = MakeBatch(64, 1000, /*tied=*/true);
  const CpuResult cpu = RunCpu(b);
  const GpuResult gpu = RunGpu(b, /*with_grad=*/false, stream_);
  ASSERT_TRUE(gpu.loss.ok()) << gpu.loss.status();
  EXPECT_NEAR(*gpu.loss, cpu.loss, kRelTol * std::fabs(cpu.loss));
  EXPECT_EQ(gpu.correct, cpu.correct);
}

TEST_F(CudaLossTest, BadLabelsAreInvalidArgumentNamingTheFirstRow) {
  Batch b = MakeBatch(257, 10, /*tied=*/false);
  b.labels[200] = 10;
  b.labels[37] = -1;
  b.labels[250] = 1 << 30;
  const GpuResult gpu = RunGpu(b, /*with_grad=*/true, stream_);
  ASSERT_EQ(gpu.loss.status().code(), absl::StatusCode::kInvalidArgument)
      << gpu.loss.status();
  const std::string message(gpu.loss.status().message());
  EXPECT_NE(message.find("label -1 of row 37 is outside [0, 10)"),
            std::string::npos)
      << message;
  // The bad rows' gradients are zeroed, not left as garbage.
  for (int64_t j = 0; j < 10; ++j) EXPECT_EQ(gpu.grad[37 * 10 + j], 0.0f);

  // The same workspace, used again with good labels, reports no error.
  b.labels[200] = b.labels[37] = b.labels[250] = 3;
  EXPECT_TRUE(RunGpu(b, /*with_grad=*/true, stream_).loss.ok());
}

TEST_F(CudaLossTest, EmptyBatchHasZeroLoss) {
  Batch b{0, 10, {}, {}};
  const GpuResult gpu = RunGpu(b, /*with_grad=*/true, stream_, 5);
  ASSERT_TRUE(gpu.loss.ok()) << gpu.loss.status();
  EXPECT_EQ(*gpu.loss, 0.0f);
  EXPECT_EQ(gpu.correct, 5);
}

TEST_F(CudaLossTest, SmallWorkspaceIsRejected) {
  const Batch b = MakeBatch(64, 10, /*tied=*/false);
  DeviceBytes logits(b.logits), labels(b.labels), loss(4), ws(8);
  CudaCrossEntropyBuffers buf;
  buf.logits = logits.as<float>();
  buf.labels = labels.as<int32_t>();
  buf.loss = loss.as<float>();
  buf.workspace = ws.as<void>();
  buf.workspace_bytes = 8;
  const absl::Status s = SoftmaxCrossEntropyAsync(buf, 64, 10, stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

// The sequence cross-entropy: logits {N, V, L} (the GPU engine's
// NCHW, a row's classes L apart) against the CPU loss over the same rows
// made contiguous ({N * L, V}, row n * L + t), with and without smoothing.
TEST_F(CudaLossTest, SequenceRowsMatchTheCpuLossOfTheTransposedLogits) {
  for (const float smoothing : {0.0f, 0.1f}) {
    const int64_t n = 3, v = 37, l = 11;
    const Batch dense = MakeBatch(n * l, v, /*tied=*/false);
    // The rows of `dense` laid out as the model's {N, V, L} output.
    std::vector<float> strided(dense.logits.size());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t t = 0; t < l; ++t) {
        for (int64_t j = 0; j < v; ++j) {
          strided[(i * v + j) * l + t] = dense.logits[(i * l + t) * v + j];
        }
      }
    }
    const CpuResult want = RunCpu(dense, smoothing);
    DeviceBytes logits(strided), labels(dense.labels), loss(sizeof(float));
    DeviceBytes grad(strided.size() * sizeof(float));
    DeviceBytes correct(std::vector<int64_t>{0});
    const size_t ws_bytes = SoftmaxCrossEntropyWorkspaceBytes(n * l);
    DeviceBytes ws(ws_bytes);
    CudaCrossEntropyBuffers buf;
    buf.logits = logits.as<float>();
    buf.labels = labels.as<int32_t>();
    buf.loss = loss.as<float>();
    buf.grad = grad.as<float>();
    buf.correct = correct.as<int64_t>();
    buf.workspace = ws.as<void>();
    buf.workspace_bytes = ws_bytes;
    buf.label_smoothing = smoothing;
    buf.positions = l;
    const absl::StatusOr<float> got =
        SoftmaxCrossEntropy(buf, n * l, v, stream_);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_NEAR(*got, want.loss, kRelTol * std::max(1.0f, std::abs(want.loss)));
    EXPECT_EQ(correct.ToHost<int64_t>(1)[0], want.correct);
    const std::vector<float> g = grad.ToHost<float>(strided.size());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t t = 0; t < l; ++t) {
        for (int64_t j = 0; j < v; ++j) {
          ASSERT_NEAR(g[(i * v + j) * l + t], want.grad[(i * l + t) * v + j],
                      1e-7)
              << "sample " << i << " position " << t << " class " << j;
        }
      }
    }
    buf.positions = 4;  // does not divide the 33 rows
    EXPECT_EQ(SoftmaxCrossEntropyAsync(buf, n * l, v, stream_).code(),
              absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace cohort

// The elementwise loss kernels (kernels/cuda/elementwise_loss.h) against the
// CPU engine's ElementwiseLoss (worker/loss.h) on random inputs: MSE, L1,
// Huber and BCE with logits, on float targets and on one-hot rows of class
// labels, loss and gradient within 1e-5 relative. Here rather than beside
// the kernels because kernels/ may not depend on worker/. Skips without a
// GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/elementwise_loss.h"
#include "worker/gpu/device_bytes.h"
#include "worker/loss.h"

namespace cohort {
namespace {

constexpr double kRelTol = 1e-5;

struct Kind {
  ElementLoss cpu;
  CudaElementLoss gpu;
  float delta;
  const char* name;
};

const Kind kKinds[] = {
    {ElementLoss::kMse, CudaElementLoss::kMse, 1.0f, "mse"},
    {ElementLoss::kL1, CudaElementLoss::kL1, 1.0f, "l1"},
    {ElementLoss::kHuber, CudaElementLoss::kHuber, 1.0f, "huber 1"},
    {ElementLoss::kHuber, CudaElementLoss::kHuber, 0.25f, "huber 0.25"},
    {ElementLoss::kHuber, CudaElementLoss::kHuber, 3.0f, "huber 3"},
    {ElementLoss::kBce, CudaElementLoss::kBce, 1.0f, "bce"},
};

uint32_t Next(uint32_t* s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

// Uniform in [-half, half).
float Uniform(uint32_t* s, float half) {
  return (static_cast<float>(Next(s)) / 16777216.0f - 0.5f) * 2 * half;
}

// Predictions up to +-range; targets near them (so every Huber branch and
// L1 sign occurs), some exactly equal (L1's zero gradient, Huber's 0), or
// in [0, 1] for BCE (with some 0s and 1s, as multi-label data has).
struct Inputs {
  std::vector<float> pred, target;
};

Inputs MakeInputs(int64_t n, float range, bool probabilities, uint32_t seed) {
  Inputs in{std::vector<float>(n), std::vector<float>(n)};
  uint32_t s = seed;
  for (int64_t i = 0; i < n; ++i) {
    in.pred[i] = Uniform(&s, range);
    const uint32_t pick = Next(&s) % 8;
    if (probabilities) {
      in.target[i] = pick == 0   ? 0.0f
                     : pick == 1 ? 1.0f
                                 : static_cast<float>(Next(&s)) / 16777216.0f;
    } else {
      in.target[i] = pick == 0 ? in.pred[i] : in.pred[i] + Uniform(&s, 4);
    }
  }
  return in;
}

struct Result {
  float loss = 0;
  std::vector<float> grad;
};

Result RunCpu(const Kind& k, const std::vector<float>& pred,
              const std::vector<float>& target) {
  const int64_t n = static_cast<int64_t>(pred.size());
  Tensor p({n}), t({n}), grad;
  std::copy(pred.begin(), pred.end(), p.data());
  std::copy(target.begin(), target.end(), t.data());
  Result r;
  r.loss = ElementwiseLoss<float>(k.cpu, k.delta, p, t, &grad);
  r.grad.assign(grad.data(), grad.data() + grad.size());
  return r;
}

// The GPU loss of `pred` against float `target`, or, when `labels` is not
// empty, against the one-hot rows of `labels` (rows of pred.size() /
// labels.size() elements, read in place).
absl::StatusOr<Result> RunGpu(const Kind& k, const std::vector<float>& pred,
                              const std::vector<float>& target,
                              const std::vector<int32_t>& labels,
                              cudaStream_t stream, bool with_grad = true) {
  const int64_t n = static_cast<int64_t>(pred.size());
  DeviceBytes p(pred), t(target), l(labels), loss(sizeof(float));
  DeviceBytes grad(n * sizeof(float));
  const size_t ws_bytes = ElementwiseLossWorkspaceBytes(n);
  DeviceBytes ws(ws_bytes);
  CudaElementwiseLossBuffers b;
  b.pred = p.as<float>();
  if (labels.empty()) {
    b.target = t.as<float>();
  } else {
    b.labels = l.as<int32_t>();
    b.row = n / static_cast<int64_t>(labels.size());
  }
  b.loss = loss.as<float>();
  b.grad = with_grad ? grad.as<float>() : nullptr;
  b.workspace = ws.as<void>();
  b.workspace_bytes = ws_bytes;
  absl::StatusOr<float> value = ElementwiseLoss(k.gpu, k.delta, b, n, stream);
  if (!value.ok()) return value.status();
  Result r;
  r.loss = *value;
  r.grad = grad.ToHost<float>(with_grad ? n : 0);
  return r;
}

void ExpectClose(const Result& gpu, const Result& cpu, int64_t n) {
  EXPECT_NEAR(gpu.loss, cpu.loss, kRelTol * std::fabs(cpu.loss) + 1e-12);
  ASSERT_EQ(gpu.grad.size(), cpu.grad.size());
  // Each gradient entry is one float product as on the CPU; BCE's sigmoid
  // - t may cancel, so the bound adds 1e-7 of 1 / n.
  const double scale = 1.0 / n;
  for (size_t i = 0; i < cpu.grad.size(); ++i) {
    ASSERT_NEAR(gpu.grad[i], cpu.grad[i],
                kRelTol * std::fabs(cpu.grad[i]) + 1e-7 * scale)
        << "element " << i;
  }
}

class CudaElementwiseLossTest : public ::testing::Test {
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

TEST_F(CudaElementwiseLossTest, MatchesCpuOnFloatTargets) {
  // 1 element, part of a block, several blocks, and more than the 1024
  // blocks of 2048 elements the grid stops at (grid-stride loop).
  for (int64_t n : {1, 100, 4097, 300000, 2100000}) {
    for (const Kind& k : kKinds) {
      for (float range : {1.0f, 30.0f}) {
        SCOPED_TRACE(std::string(k.name) + " n=" + std::to_string(n) +
                     " range=" + std::to_string(range));
        const Inputs in = MakeInputs(n, range, k.cpu == ElementLoss::kBce,
                                     static_cast<uint32_t>(n * 13 + range));
        absl::StatusOr<Result> gpu = RunGpu(k, in.pred, in.target, {}, stream_);
        ASSERT_TRUE(gpu.ok()) << gpu.status();
        ExpectClose(*gpu, RunCpu(k, in.pred, in.target), n);
      }
    }
  }
}

// Class labels under an elementwise loss: the kernel reads the labels in
// place; the CPU compares with one-hot rows (worker/objective.cc's scratch).
TEST_F(CudaElementwiseLossTest, MatchesCpuOnOneHotRowsOfLabels) {
  for (int64_t rows : {1, 64, 3000}) {
    for (int64_t c : {1, 10, 1000}) {
      uint32_t s = static_cast<uint32_t>(rows * 31 + c);
      std::vector<int32_t> labels(rows);
      std::vector<float> onehot(rows * c, 0.0f);
      for (int64_t i = 0; i < rows; ++i) {
        labels[i] = static_cast<int32_t>(Next(&s) % c);
        onehot[i * c + labels[i]] = 1.0f;
      }
      const Inputs in = MakeInputs(rows * c, 5.0f, false, s);
      for (const Kind& k : kKinds) {
        SCOPED_TRACE(std::string(k.name) + " rows=" + std::to_string(rows) +
                     " c=" + std::to_string(c));
        absl::StatusOr<Result> gpu = RunGpu(k, in.pred, {}, labels, stream_);
        ASSERT_TRUE(gpu.ok()) << gpu.status();
        ExpectClose(*gpu, RunCpu(k, in.pred, onehot), rows * c);
      }
    }
  }
}

TEST_F(CudaElementwiseLossTest, L1GradientIsZeroWhereEqual) {
  const Kind& l1 = kKinds[1];
  const std::vector<float> pred = {1, 2, 3, -4}, target = {1, 0, 3, 4};
  absl::StatusOr<Result> gpu = RunGpu(l1, pred, target, {}, stream_);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_FLOAT_EQ(gpu->loss, (0 + 2 + 0 + 8) / 4.0f);
  EXPECT_EQ(gpu->grad, (std::vector<float>{0, 0.25f, 0, -0.25f}));
}

TEST_F(CudaElementwiseLossTest, BceStaysFiniteForLargeLogits) {
  const Kind& bce = kKinds[5];
  const std::vector<float> pred = {1000, -1000, 80, -80}, target = {0, 1, 1, 0};
  absl::StatusOr<Result> gpu = RunGpu(bce, pred, target, {}, stream_);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_NEAR(gpu->loss, 500.0, 1e-3);
  EXPECT_TRUE(std::isfinite(gpu->loss));
  for (float g : gpu->grad) EXPECT_TRUE(std::isfinite(g));
  ExpectClose(*gpu, RunCpu(bce, pred, target), 4);
}

TEST_F(CudaElementwiseLossTest, RepeatsBitForBit) {
  const Inputs in = MakeInputs(1 << 20, 10.0f, false, 7);
  for (const Kind& k : kKinds) {
    absl::StatusOr<Result> a = RunGpu(k, in.pred, in.target, {}, stream_);
    absl::StatusOr<Result> b = RunGpu(k, in.pred, in.target, {}, stream_);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->loss, b->loss) << k.name;
    EXPECT_EQ(a->grad, b->grad) << k.name;
  }
}

TEST_F(CudaElementwiseLossTest, WithoutGradientGivesTheSameLoss) {
  const Inputs in = MakeInputs(5000, 3.0f, false, 3);
  for (const Kind& k : kKinds) {
    absl::StatusOr<Result> with = RunGpu(k, in.pred, in.target, {}, stream_);
    absl::StatusOr<Result> without =
        RunGpu(k, in.pred, in.target, {}, stream_, /*with_grad=*/false);
    ASSERT_TRUE(with.ok() && without.ok());
    EXPECT_EQ(with->loss, without->loss) << k.name;
  }
}

TEST_F(CudaElementwiseLossTest, EmptyInputHasZeroLoss) {
  absl::StatusOr<Result> gpu = RunGpu(kKinds[0], {}, {}, {}, stream_);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ(gpu->loss, 0.0f);
}

TEST_F(CudaElementwiseLossTest, BadArgumentsAreInvalidArgument) {
  const std::vector<float> pred(10, 1.0f), target(10, 0.0f);
  // Huber needs delta > 0.
  const Kind bad_huber = {ElementLoss::kHuber, CudaElementLoss::kHuber, 0.0f,
                          "huber 0"};
  EXPECT_EQ(RunGpu(bad_huber, pred, target, {}, stream_).status().code(),
            absl::StatusCode::kInvalidArgument);
  // 10 elements are not whole rows of 10 / 3 = 3.
  EXPECT_EQ(RunGpu(kKinds[0], pred, {}, {0, 1, 2}, stream_).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A workspace too small.
  DeviceBytes p(pred), t(target), loss(4), ws(4);
  CudaElementwiseLossBuffers b;
  b.pred = p.as<float>();
  b.target = t.as<float>();
  b.loss = loss.as<float>();
  b.workspace = ws.as<void>();
  b.workspace_bytes = 4;
  EXPECT_EQ(
      ElementwiseLossAsync(CudaElementLoss::kMse, 1, b, 10, stream_).code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cohort

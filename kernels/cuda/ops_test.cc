// The CUDA kernels of kernels/cuda/ops.h against CPU references: the CPU
// update rules of kernels/update_rules.h, plain loops for the elementwise
// operations, and kernels/cuda/ops_reference.h for casts and dropout masks.
//
// Tests that need a GPU skip with the reason where there is none. Argument
// checks and the comparison of the reference casts with the CUDA headers'
// own host conversions run everywhere this target is built with CUDA.
#include "kernels/cuda/ops.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/dropout_rng.h"
#include "kernels/cuda/ops_reference.h"
#include "kernels/update_rules.h"

namespace cohort {
namespace gpu {
namespace {

#define ASSERT_OK(expr)                   \
  do {                                    \
    const absl::Status status_ = (expr);  \
    ASSERT_TRUE(status_.ok()) << status_; \
  } while (false)

#define ASSERT_CUDA(expr)                               \
  do {                                                  \
    const cudaError_t error_ = (expr);                  \
    ASSERT_EQ(error_, cudaSuccess)                      \
        << #expr << ": " << cudaGetErrorString(error_); \
  } while (false)

// The sizes the brief asks for: one element, a small odd count, and more
// than 2^20 with a ragged tail.
const int64_t kSizes[] = {1, 1000, (1 << 20) + 7};

// Device memory owned by the test; freed on destruction.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }

  cudaError_t Allocate(size_t n) {
    n_ = n;
    return cudaMalloc(reinterpret_cast<void**>(&ptr_),
                      std::max<size_t>(n, 1) * sizeof(T));
  }
  cudaError_t Upload(const std::vector<T>& host) {
    if (ptr_ == nullptr) {
      const cudaError_t e = Allocate(host.size());
      if (e != cudaSuccess) return e;
    }
    return cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T),
                      cudaMemcpyHostToDevice);
  }
  cudaError_t Download(std::vector<T>* host) const {
    host->resize(n_);
    return cudaMemcpy(host->data(), ptr_, n_ * sizeof(T),
                      cudaMemcpyDeviceToHost);
  }
  T* get() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
  size_t n_ = 0;
};

std::vector<float> RandomNormal(int64_t n, uint32_t seed, float scale = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// |got - want| <= rel * max(|got|, |want|) + abs elementwise; reports the
// first few mismatches and the count. Update rules pass an `abs` scaled by
// the learning rate: a parameter that the steps carried near zero keeps the
// rounding of values the size of a step, not of its own size.
void ExpectClose(absl::Span<const float> got, absl::Span<const float> want,
                 double rel, const std::string& what, double abs = 1e-10) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    const double tol = rel * std::max(std::abs(g), std::abs(w)) + abs;
    if (!(std::abs(g - w) <= tol)) {
      if (++bad <= 5) {
        ADD_FAILURE() << what << ": element " << i << " is " << g
                      << ", CPU reference " << w;
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size()
                    << " elements differ";
}

// Bitwise float equality (so -0 differs from +0), reporting the first few.
void ExpectSameFloats(const std::vector<float>& got,
                      const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      if (++bad <= 5) {
        ADD_FAILURE() << what << ": element " << i << " is " << got[i]
                      << ", CPU reference " << want[i];
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size()
                    << " elements differ";
}

// Masks equal, reporting the first few differences (not the whole vector).
void ExpectSameMask(const std::vector<uint8_t>& got,
                    const std::vector<uint8_t>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i] && ++bad <= 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << int{got[i]}
                    << ", CPU reference " << int{want[i]};
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size()
                    << " elements differ";
}

class OpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const CudaDevices devices = FindCudaDevices();
    if (devices.names.empty()) {
      GTEST_SKIP() << "no CUDA device: " << devices.reason;
    }
    ASSERT_CUDA(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  cudaStream_t stream_ = nullptr;
};

// ---------------------------------------------------------------- optimizers

struct SgdCase {
  float momentum;
  float weight_decay;
  bool nesterov;
};

TEST_F(OpsTest, SgdMatchesCpuOptimizerOverSeveralSteps) {
  const SgdCase cases[] = {{0.0f, 0.0f, false},   // plain
                           {0.0f, 0.01f, false},  // plain with weight decay
                           {0.9f, 0.0f, false},   // momentum
                           {0.9f, 1e-4f, false},  // momentum with weight decay
                           {0.875f, 5e-4f, true}};  // Nesterov
  const double lrs[] = {0.1, 0.05, 0.0125};
  for (const SgdCase& c : cases) {
    for (int64_t n : kSizes) {
      const std::string where = "sgd momentum " + std::to_string(c.momentum) +
                                " wd " + std::to_string(c.weight_decay) +
                                (c.nesterov ? " nesterov" : "") + " n " +
                                std::to_string(n);
      const SgdOptions options{c.momentum, c.weight_decay, c.nesterov};
      std::unique_ptr<UpdateRule<float>> cpu = MakeSgdRule<float>(options, n);

      std::vector<float> p = RandomNormal(n, 1);
      DeviceArray<float> dp, dg, db;
      ASSERT_CUDA(dp.Upload(p));
      ASSERT_CUDA(dg.Allocate(n));
      if (c.momentum != 0) {
        ASSERT_CUDA(db.Upload(std::vector<float>(n, 0.0f)));
      }
      for (int step = 0; step < 3; ++step) {
        const std::vector<float> g = RandomNormal(n, 100 + step);
        cpu->Step(absl::MakeSpan(p), absl::MakeConstSpan(g), lrs[step]);
        ASSERT_CUDA(dg.Upload(g));
        ASSERT_OK(SgdStep(dp.get(), dg.get(), db.get(), n, lrs[step], options,
                          stream_));
        ASSERT_CUDA(cudaStreamSynchronize(stream_));
        std::vector<float> got;
        ASSERT_CUDA(dp.Download(&got));
        const std::string at = where + " step " + std::to_string(step);
        ExpectClose(got, p, 1e-5, at + " params");
        if (c.momentum != 0) {
          ASSERT_CUDA(db.Download(&got));
          const BasicTensor<float>* buffer = cpu->State()[0];
          ExpectClose(got, absl::MakeConstSpan(buffer->data(), buffer->size()),
                      1e-5, at + " momentum buffer");
        }
      }
    }
  }
}

TEST_F(OpsTest, AdamAndAdamWMatchCpuOptimizerOverSeveralSteps) {
  const double lrs[] = {1e-3, 5e-4, 2e-3, 1e-3};
  for (bool decoupled : {false, true}) {
    for (float wd : {0.0f, 0.01f}) {
      for (int64_t n : kSizes) {
        const std::string where = std::string(decoupled ? "adamw" : "adam") +
                                  " wd " + std::to_string(wd) + " n " +
                                  std::to_string(n);
        // The hyper-parameters as a job spec's floats hold them.
        AdamOptions options;
        options.beta1 = 0.9f;
        options.beta2 = 0.999f;
        options.eps = 1e-8f;
        options.weight_decay = wd;
        options.decoupled = decoupled;
        std::unique_ptr<UpdateRule<float>> cpu =
            MakeAdamRule<float>(options, n);

        std::vector<float> p = RandomNormal(n, 2);
        const std::vector<float> zeros(n, 0.0f);
        DeviceArray<float> dp, dg, dm, dv;
        ASSERT_CUDA(dp.Upload(p));
        ASSERT_CUDA(dg.Allocate(n));
        ASSERT_CUDA(dm.Upload(zeros));
        ASSERT_CUDA(dv.Upload(zeros));
        for (int step = 0; step < 4; ++step) {
          const std::vector<float> g = RandomNormal(n, 200 + step, 0.1f);
          cpu->Step(absl::MakeSpan(p), absl::MakeConstSpan(g), lrs[step]);
          ASSERT_CUDA(dg.Upload(g));
          ASSERT_OK(AdamStep(dp.get(), dg.get(), dm.get(), dv.get(), n,
                             lrs[step], step + 1, options, stream_));
          ASSERT_CUDA(cudaStreamSynchronize(stream_));
          const std::vector<BasicTensor<float>*> state = cpu->State();
          const std::string at = where + " step " + std::to_string(step + 1);
          std::vector<float> got;
          ASSERT_CUDA(dp.Download(&got));
          ExpectClose(got, p, 1e-5, at + " params");
          ASSERT_CUDA(dm.Download(&got));
          ExpectClose(got, absl::MakeConstSpan(state[0]->data(), n), 1e-5,
                      at + " m");
          ASSERT_CUDA(dv.Download(&got));
          ExpectClose(got, absl::MakeConstSpan(state[1]->data(), n), 1e-5,
                      at + " v");
        }
      }
    }
  }
}

// A buffer of tensors crossing kNormBlock multiples, biases excluded from
// decay (ParamTensorsOf as the engines make it), for the layout-aware
// rules.
std::vector<ParamTensor> LayoutTensors() {
  return ParamTensorsOf({3 * kNormBlock + 64, 48, 5 * kNormBlock, 16, 2000},
                        {false, true, false, true, false});
}

// What the GPU engine keeps for LAMB and LARS: the piece table and its
// scratch, on the device.
struct DeviceTable {
  DeviceArray<int64_t> pieces, tensor_pieces;
  DeviceArray<double> sums, totals;
  PieceTable table;
};

void UploadTable(const RuleLayout& whole, DeviceTable* t) {
  std::vector<int64_t> pieces, tensor_pieces;
  PieceTableArrays(whole, &pieces, &tensor_pieces);
  ASSERT_CUDA(t->pieces.Upload(pieces));
  ASSERT_CUDA(t->tensor_pieces.Upload(tensor_pieces));
  ASSERT_CUDA(t->sums.Allocate(2 * whole.num_pieces));
  ASSERT_CUDA(t->totals.Allocate(2 * whole.num_tensors));
  t->table = {t->pieces.get(),   t->tensor_pieces.get(), whole.num_pieces,
              whole.num_tensors, t->sums.get(),          t->totals.get()};
}

TEST_F(OpsTest, RmspropMatchesCpuRuleOverSeveralSteps) {
  const std::vector<ParamTensor> tensors = LayoutTensors();
  const int64_t n = tensors.back().end;
  const RuleLayout whole = MakeRuleLayout(tensors, 0, n);
  for (int variant = 0; variant < 3; ++variant) {
    RmspropOptions options;
    options.alpha = 0.99f;
    options.eps = 1e-8f;
    options.weight_decay = 0.01f;
    options.momentum = variant >= 1 ? 0.9f : 0.0f;
    options.centered = variant == 2;
    std::unique_ptr<UpdateRule<float>> cpu =
        MakeRmspropRule<float>(options, n, whole);
    std::vector<float> p = RandomNormal(n, 3);
    const std::vector<float> zeros(n, 0.0f);
    DeviceArray<float> dp, dg, dsq, db, da;
    ASSERT_CUDA(dp.Upload(p));
    ASSERT_CUDA(dg.Allocate(n));
    ASSERT_CUDA(dsq.Upload(zeros));
    ASSERT_CUDA(db.Upload(zeros));
    ASSERT_CUDA(da.Upload(zeros));
    for (int step = 0; step < 4; ++step) {
      const std::vector<float> g = RandomNormal(n, 300 + step, 0.1f);
      cpu->Step(absl::MakeSpan(p), absl::MakeConstSpan(g), 1e-3);
      ASSERT_CUDA(dg.Upload(g));
      // As the GPU engine steps it: one launch per run of the same decay.
      for (const DecayRun& r : DecayRuns(whole, n)) {
        RmspropOptions o = options;
        if (!r.decay) o.weight_decay = 0;
        ASSERT_OK(RmspropStep(dp.get() + r.begin, dg.get() + r.begin,
                              dsq.get() + r.begin, db.get() + r.begin,
                              da.get() + r.begin, r.end - r.begin, 1e-3, o,
                              stream_));
      }
      ASSERT_CUDA(cudaStreamSynchronize(stream_));
      std::vector<float> got;
      ASSERT_CUDA(dp.Download(&got));
      ExpectClose(got, p, 1e-5,
                  "rmsprop variant " + std::to_string(variant) + " step " +
                      std::to_string(step + 1),
                  1e-5 * 1e-3);
    }
  }
}

TEST_F(OpsTest, LambAndLarsMatchCpuRulesOverSeveralSteps) {
  const std::vector<ParamTensor> tensors = LayoutTensors();
  const int64_t n = tensors.back().end;
  const RuleLayout whole = MakeRuleLayout(tensors, 0, n);
  DeviceTable table;
  UploadTable(whole, &table);
  for (bool lamb : {true, false}) {
    LambOptions lo;
    lo.weight_decay = 0.01f;
    lo.eps = 1e-6f;
    LarsOptions ro;
    ro.momentum = 0.9f;
    ro.weight_decay = 0.0005f;
    ro.trust_coefficient = 0.001f;
    std::unique_ptr<UpdateRule<float>> cpu =
        lamb ? MakeLambRule<float>(lo, n, whole)
             : MakeLarsRule<float>(ro, n, whole);
    std::vector<float> p = RandomNormal(n, 4);
    const std::vector<float> zeros(n, 0.0f);
    DeviceArray<float> dp, dg, dm, dv;
    ASSERT_CUDA(dp.Upload(p));
    ASSERT_CUDA(dg.Allocate(n));
    ASSERT_CUDA(dm.Upload(zeros));
    ASSERT_CUDA(dv.Upload(zeros));
    for (int step = 0; step < 4; ++step) {
      const std::vector<float> g = RandomNormal(n, 400 + step, 0.1f);
      const double lr = lamb ? 1e-2 : 0.5;
      cpu->Step(absl::MakeSpan(p), absl::MakeConstSpan(g), lr);
      ASSERT_CUDA(dg.Upload(g));
      if (lamb) {
        ASSERT_OK(LambStep(dp.get(), dg.get(), dm.get(), dv.get(), lr, step + 1,
                           lo, table.table, stream_));
      } else {
        ASSERT_OK(LarsStep(dp.get(), dg.get(), dm.get(), lr, ro, table.table,
                           stream_));
      }
      ASSERT_CUDA(cudaStreamSynchronize(stream_));
      std::vector<float> got;
      ASSERT_CUDA(dp.Download(&got));
      ExpectClose(got, p, 1e-5,
                  std::string(lamb ? "lamb" : "lars") + " step " +
                      std::to_string(step + 1),
                  1e-5 * lr);
    }
  }
}

// ------------------------------------------------------ gradient averaging

TEST_F(OpsTest, ScaleInPlaceMatchesCpu) {
  for (int64_t n : kSizes) {
    const std::vector<float> y = RandomNormal(n, 3);
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = y[i] * 0.125f;
    DeviceArray<float> dy;
    ASSERT_CUDA(dy.Upload(y));
    ASSERT_OK(ScaleInPlace(dy.get(), n, 0.125f, stream_));
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    std::vector<float> got;
    ASSERT_CUDA(dy.Download(&got));
    ExpectClose(got, want, 1e-5, "scale n " + std::to_string(n));
  }
}

// k = 40 needs three chained launches (16 inputs per launch).
TEST_F(OpsTest, SumScaledMatchesCpuForManyInputCounts) {
  for (int k : {1, 3, 16, 17, 40}) {
    for (int64_t n : kSizes) {
      const std::string where =
          "sum of " + std::to_string(k) + " n " + std::to_string(n);
      const float scale = 1.0f / k;
      std::vector<std::vector<float>> host(k);
      std::vector<std::unique_ptr<DeviceArray<float>>> device(k);
      std::vector<const float*> inputs(k);
      for (int j = 0; j < k; ++j) {
        host[j] = RandomNormal(n, 300 + j);
        device[j] = std::make_unique<DeviceArray<float>>();
        ASSERT_CUDA(device[j]->Upload(host[j]));
        inputs[j] = device[j]->get();
      }
      std::vector<float> want(n);
      for (int64_t i = 0; i < n; ++i) {
        float s = host[0][i];
        for (int j = 1; j < k; ++j) s += host[j][i];
        want[i] = s * scale;
      }
      DeviceArray<float> out;
      ASSERT_CUDA(out.Allocate(n));
      ASSERT_OK(SumScaled(inputs.data(), k, n, scale, out.get(), stream_));
      ASSERT_CUDA(cudaStreamSynchronize(stream_));
      std::vector<float> got;
      ASSERT_CUDA(out.Download(&got));
      ExpectClose(got, want, 1e-5, where);

      // Into the first replica's buffer.
      ASSERT_OK(
          SumScaled(inputs.data(), k, n, scale, device[0]->get(), stream_));
      ASSERT_CUDA(cudaStreamSynchronize(stream_));
      ASSERT_CUDA(device[0]->Download(&got));
      ExpectClose(got, want, 1e-5, where + " in place");
    }
  }
}

// ----------------------------------------------------- bias + activation

struct Shape2 {
  int64_t rows, cols;
};

const Shape2 kShapes[] = {
    {1, 1},      {40, 25}, {25, 40}, {1, (1 << 20) + 7}, {(1 << 20) + 7, 1},
    {1031, 1017}};

std::string Describe(Shape2 s, BiasLayout layout, Activation act) {
  return "{" + std::to_string(s.rows) + ", " + std::to_string(s.cols) + "} " +
         (layout == BiasLayout::kPerRow ? "per-row" : "per-column") +
         (act == Activation::kRelu ? " relu" : " identity");
}

TEST_F(OpsTest, BiasActivationForwardMatchesCpu) {
  for (Shape2 s : kShapes) {
    const int64_t n = s.rows * s.cols;
    const std::vector<float> x = RandomNormal(n, 4);
    DeviceArray<float> dx, dy;
    ASSERT_CUDA(dx.Upload(x));
    ASSERT_CUDA(dy.Allocate(n));
    for (BiasLayout layout : {BiasLayout::kPerColumn, BiasLayout::kPerRow}) {
      const int64_t bias_size = layout == BiasLayout::kPerRow ? s.rows : s.cols;
      const std::vector<float> bias = RandomNormal(bias_size, 5);
      DeviceArray<float> dbias;
      ASSERT_CUDA(dbias.Upload(bias));
      for (Activation act : {Activation::kIdentity, Activation::kRelu}) {
        for (bool with_bias : {true, false}) {
          const std::string where = Describe(s, layout, act) +
                                    (with_bias ? " with bias" : " no bias");
          std::vector<float> want(n);
          for (int64_t r = 0; r < s.rows; ++r) {
            for (int64_t c = 0; c < s.cols; ++c) {
              const int64_t i = r * s.cols + c;
              float v = x[i];
              if (with_bias) {
                v += bias[layout == BiasLayout::kPerRow ? r : c];
              }
              // kernels/elementwise.cc's ReluForward.
              if (act == Activation::kRelu) v = v > 0.0f ? v : 0.0f;
              want[i] = v;
            }
          }
          ASSERT_OK(BiasActivationForward(
              dx.get(), with_bias ? dbias.get() : nullptr, s.rows, s.cols,
              layout, act, dy.get(), stream_));
          ASSERT_CUDA(cudaStreamSynchronize(stream_));
          std::vector<float> got;
          ASSERT_CUDA(dy.Download(&got));
          ExpectSameFloats(got, want, where);
        }
      }
    }
  }
}

TEST_F(OpsTest, BiasActivationBackwardMatchesCpu) {
  for (Shape2 s : kShapes) {
    const int64_t n = s.rows * s.cols;
    // Forward outputs with zeros (as ReLU leaves them) and negatives.
    std::vector<float> y = RandomNormal(n, 6);
    for (int64_t i = 0; i < n; i += 3) y[i] = 0.0f;
    const std::vector<float> dy = RandomNormal(n, 7);
    DeviceArray<float> d_y, d_dy, d_dx;
    ASSERT_CUDA(d_y.Upload(y));
    ASSERT_CUDA(d_dy.Upload(dy));
    ASSERT_CUDA(d_dx.Allocate(n));
    for (BiasLayout layout : {BiasLayout::kPerColumn, BiasLayout::kPerRow}) {
      const int64_t bias_size = layout == BiasLayout::kPerRow ? s.rows : s.cols;
      for (Activation act : {Activation::kIdentity, Activation::kRelu}) {
        const std::string where = Describe(s, layout, act);
        std::vector<float> want_dx(n);
        std::vector<double> want_db(bias_size, 0.0), abs_db(bias_size, 0.0);
        for (int64_t r = 0; r < s.rows; ++r) {
          for (int64_t c = 0; c < s.cols; ++c) {
            const int64_t i = r * s.cols + c;
            // kernels/elementwise.cc's ReluBackward.
            const float g =
                act == Activation::kRelu ? (y[i] > 0.0f ? dy[i] : 0.0f) : dy[i];
            want_dx[i] = g;
            const int64_t b = layout == BiasLayout::kPerRow ? r : c;
            want_db[b] += g;
            abs_db[b] += std::abs(g);
          }
        }
        DeviceArray<float> d_db;
        // Poisoned, to see that every element is overwritten.
        ASSERT_CUDA(d_db.Upload(std::vector<float>(bias_size, 1e30f)));
        ASSERT_OK(BiasActivationBackward(d_y.get(), d_dy.get(), s.rows, s.cols,
                                         layout, act, d_dx.get(), d_db.get(),
                                         stream_));
        ASSERT_CUDA(cudaStreamSynchronize(stream_));
        std::vector<float> got;
        ASSERT_CUDA(d_dx.Download(&got));
        ExpectSameFloats(got, want_dx, where + " dx");
        ASSERT_CUDA(d_db.Download(&got));
        for (int64_t b = 0; b < bias_size; ++b) {
          ASSERT_NEAR(got[b], want_db[b],
                      1e-5 * std::abs(want_db[b]) + 1e-9 * abs_db[b] + 1e-30)
              << where << " bias gradient " << b;
        }

        // Without a bias gradient, only dx (here in place over a copy of dy).
        DeviceArray<float> d_inplace;
        ASSERT_CUDA(d_inplace.Upload(dy));
        ASSERT_OK(BiasActivationBackward(d_y.get(), d_inplace.get(), s.rows,
                                         s.cols, layout, act, d_inplace.get(),
                                         nullptr, stream_));
        ASSERT_CUDA(cudaStreamSynchronize(stream_));
        ASSERT_CUDA(d_inplace.Download(&got));
        ExpectSameFloats(got, want_dx, where + " dx in place, no bias");
      }
    }
  }
}

TEST_F(OpsTest, BiasGradientOfAnEmptyBatchIsZero) {
  DeviceArray<float> d_db;
  ASSERT_CUDA(d_db.Upload(std::vector<float>(7, 3.0f)));
  ASSERT_OK(BiasActivationBackward(nullptr, nullptr, 0, 7,
                                   BiasLayout::kPerColumn, Activation::kRelu,
                                   nullptr, d_db.get(), stream_));
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
  std::vector<float> got;
  ASSERT_CUDA(d_db.Download(&got));
  EXPECT_EQ(got, std::vector<float>(7, 0.0f));
}

// ------------------------------------------------------------------- casts

float FloatOf(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

// Specials and rounding cases first, then random bit patterns (every class
// of float: NaNs, infinities, subnormals, both signs) and values near 1.
std::vector<float> CastInputs(int64_t n) {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          65504.0f,
                          65520.0f,
                          0x1p-24f,
                          0x1p-25f,
                          0x3p-25f,
                          FloatOf(0x3f808000u),
                          FloatOf(0x3f818000u),
                          FloatOf(0x00018000u),
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          FloatOf(0x7f800001u)};
  v.resize(std::min<int64_t>(n, v.size()));
  std::mt19937 rng(8);
  std::uniform_int_distribution<uint32_t> bits;
  std::normal_distribution<float> normal;
  while (static_cast<int64_t>(v.size()) < n) {
    v.push_back(v.size() % 2 ? FloatOf(bits(rng)) : normal(rng));
  }
  return v;
}

// Bits equal, except that any NaN matches any NaN (the conversions'
// choice of NaN encoding is not part of the contract we test).
void ExpectSameHalves(const std::vector<uint16_t>& got,
                      const std::vector<float>& in,
                      uint16_t (*reference)(float), const std::string& what) {
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const uint16_t want = reference(in[i]);
    const bool both_nan = std::isnan(in[i]) && (got[i] & 0x7fff) > 0x7c00;
    if (got[i] != want && !both_nan && ++bad <= 5) {
      ADD_FAILURE() << what << ": element " << i << " (" << in[i] << ") gave 0x"
                    << std::hex << got[i] << ", CPU reference 0x" << want;
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

TEST_F(OpsTest, FloatToBf16AndFp16MatchReferenceConversions) {
  for (int64_t n : kSizes) {
    const std::vector<float> in = CastInputs(n);
    DeviceArray<float> d_in;
    DeviceArray<uint16_t> d_out;
    ASSERT_CUDA(d_in.Upload(in));
    ASSERT_CUDA(d_out.Allocate(n));
    std::vector<uint16_t> got;
    ASSERT_OK(FloatToBf16(d_in.get(), d_out.get(), n, stream_));
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    ASSERT_CUDA(d_out.Download(&got));
    ExpectSameHalves(got, in, &Bf16FromFloat, "bf16 n " + std::to_string(n));
    // A bf16 NaN is exponent all ones and a nonzero mantissa.
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(in[i])) {
        ASSERT_GT(got[i] & 0x7fff, 0x7f80) << i;
      }
    }

    ASSERT_OK(FloatToFp16(d_in.get(), d_out.get(), n, stream_));
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    ASSERT_CUDA(d_out.Download(&got));
    ExpectSameHalves(got, in, &Fp16FromFloat, "fp16 n " + std::to_string(n));
  }
}

TEST_F(OpsTest, Bf16AndFp16ToFloatAreExactForEveryEncoding) {
  std::vector<uint16_t> all(1 << 16);
  for (uint32_t h = 0; h < all.size(); ++h) all[h] = static_cast<uint16_t>(h);
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{1} << 16}) {
    const std::vector<uint16_t> in(all.begin(), all.begin() + n);
    DeviceArray<uint16_t> d_in;
    DeviceArray<float> d_out;
    ASSERT_CUDA(d_in.Upload(in));
    ASSERT_CUDA(d_out.Allocate(n));
    for (bool bf16 : {true, false}) {
      ASSERT_OK(bf16 ? Bf16ToFloat(d_in.get(), d_out.get(), n, stream_)
                     : Fp16ToFloat(d_in.get(), d_out.get(), n, stream_));
      ASSERT_CUDA(cudaStreamSynchronize(stream_));
      std::vector<float> got;
      ASSERT_CUDA(d_out.Download(&got));
      for (int64_t i = 0; i < n; ++i) {
        const float want = bf16 ? FloatFromBf16(in[i]) : FloatFromFp16(in[i]);
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(got[i])) << (bf16 ? "bf16" : "fp16") << i;
        } else {
          ASSERT_EQ(std::memcmp(&got[i], &want, sizeof(float)), 0)
              << (bf16 ? "bf16 0x" : "fp16 0x") << std::hex << in[i] << " gave "
              << got[i] << ", want " << want;
        }
      }
    }
  }
}

// ----------------------------------------------------------------- dropout

TEST_F(OpsTest, DropoutMaskAndValuesMatchCpu) {
  for (double p : {0.0, 0.3, 0.5}) {
    for (int64_t n : kSizes) {
      const uint64_t seed = 1234, offset = 99;
      const std::string where =
          "dropout p " + std::to_string(p) + " n " + std::to_string(n);
      const std::vector<float> in = RandomNormal(n, 9);
      std::vector<uint8_t> want_mask(n);
      DropoutMaskReference(seed, offset, n, p, want_mask.data());
      // worker/layers/dropout.cc's scale and kernels/elementwise.cc's
      // MaskedScale.
      const float scale = static_cast<float>(1.0 / (1.0 - p));
      std::vector<float> want(n);
      for (int64_t i = 0; i < n; ++i) {
        want[i] = in[i] * (scale * static_cast<float>(want_mask[i]));
      }

      DeviceArray<float> d_in, d_out;
      DeviceArray<uint8_t> d_mask;
      ASSERT_CUDA(d_in.Upload(in));
      ASSERT_CUDA(d_out.Allocate(n));
      ASSERT_CUDA(d_mask.Allocate(n));
      ASSERT_OK(DropoutForward(d_in.get(), d_out.get(), d_mask.get(), n, p,
                               seed, offset, stream_));
      ASSERT_CUDA(cudaStreamSynchronize(stream_));
      std::vector<uint8_t> got_mask;
      std::vector<float> got;
      ASSERT_CUDA(d_mask.Download(&got_mask));
      ASSERT_CUDA(d_out.Download(&got));
      ExpectSameMask(got_mask, want_mask, where + " mask");
      ExpectSameFloats(got, want, where + " forward");

      // Backward regenerates the mask: same values from the same (seed,
      // offset), here in place.
      ASSERT_OK(
          DropoutBackward(d_in.get(), d_in.get(), n, p, seed, offset, stream_));
      ASSERT_CUDA(cudaStreamSynchronize(stream_));
      ASSERT_CUDA(d_in.Download(&got));
      ExpectSameFloats(got, want, where + " backward");
    }
  }
}

// A tensor processed in two pieces (offsets 0 and k) gets one call's mask.
TEST_F(OpsTest, DropoutPiecesMatchOneCall) {
  constexpr int64_t kN = 100000, kSplit = 33333;
  const std::vector<float> in = RandomNormal(kN, 10);
  DeviceArray<float> d_in, d_out;
  DeviceArray<uint8_t> d_whole, d_pieces;
  ASSERT_CUDA(d_in.Upload(in));
  ASSERT_CUDA(d_out.Allocate(kN));
  ASSERT_CUDA(d_whole.Allocate(kN));
  ASSERT_CUDA(d_pieces.Allocate(kN));
  ASSERT_OK(DropoutForward(d_in.get(), d_out.get(), d_whole.get(), kN, 0.4, 5,
                           0, stream_));
  ASSERT_OK(DropoutForward(d_in.get(), d_out.get(), d_pieces.get(), kSplit, 0.4,
                           5, 0, stream_));
  ASSERT_OK(DropoutForward(d_in.get() + kSplit, d_out.get() + kSplit,
                           d_pieces.get() + kSplit, kN - kSplit, 0.4, 5, kSplit,
                           stream_));
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
  std::vector<uint8_t> whole, pieces;
  ASSERT_CUDA(d_whole.Download(&whole));
  ASSERT_CUDA(d_pieces.Download(&pieces));
  ExpectSameMask(pieces, whole, "dropout in two pieces");
}

// ------------------------------------------------ without a device

// Arguments are checked before the device is touched, so these run on any
// machine with this target built.
TEST(OpsArguments, AreCheckedBeforeAnyLaunch) {
  float* const fake = reinterpret_cast<float*>(0x1000);  // never dereferenced
  uint16_t* const fake16 = reinterpret_cast<uint16_t*>(0x1000);
  auto invalid = [](const absl::Status& s) {
    return s.code() == absl::StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(invalid(SgdStep(fake, fake, fake, -1, 0.1, {}, nullptr)));
  EXPECT_TRUE(invalid(SgdStep(nullptr, fake, fake, 10, 0.1, {}, nullptr)));
  const absl::Status no_buffer =
      SgdStep(fake, fake, nullptr, 10, 0.1, SgdOptions{0.9, 0, false}, nullptr);
  EXPECT_TRUE(invalid(no_buffer));
  EXPECT_NE(no_buffer.message().find("momentum buffer"), std::string::npos)
      << no_buffer;
  EXPECT_TRUE(
      invalid(AdamStep(fake, fake, fake, fake, 10, 0.1, 0, {}, nullptr)));
  EXPECT_TRUE(
      invalid(AdamStep(fake, fake, nullptr, fake, 10, 0.1, 1, {}, nullptr)));
  RmspropOptions centered;
  centered.centered = true;
  EXPECT_TRUE(invalid(RmspropStep(fake, fake, fake, fake, nullptr, 10, 0.1,
                                  centered, nullptr)));
  EXPECT_TRUE(invalid(
      RmspropStep(fake, fake, nullptr, fake, fake, 10, 0.1, {}, nullptr)));
  PieceTable one;
  one.num_pieces = 1;
  one.num_tensors = 1;
  EXPECT_TRUE(invalid(
      LambStep(fake, fake, fake, fake, 0.1, 1, {}, one, nullptr)));  // no table
  EXPECT_TRUE(invalid(LarsStep(fake, fake, nullptr, 0.1, {}, one, nullptr)));
  EXPECT_TRUE(invalid(ScaleInPlace(nullptr, 3, 2.0f, nullptr)));
  const float* inputs[2] = {fake, fake + 8};
  EXPECT_TRUE(invalid(SumScaled(inputs, 0, 10, 1.0f, fake, nullptr)));
  EXPECT_TRUE(invalid(SumScaled(nullptr, 2, 10, 1.0f, fake, nullptr)));
  EXPECT_TRUE(invalid(SumScaled(inputs, 2, 10, 1.0f, fake + 8, nullptr)));
  EXPECT_TRUE(
      invalid(BiasActivationForward(fake, fake, -1, 4, BiasLayout::kPerRow,
                                    Activation::kRelu, fake, nullptr)));
  EXPECT_TRUE(invalid(BiasActivationForward(fake, fake, 2, 4,
                                            static_cast<BiasLayout>(7),
                                            Activation::kRelu, fake, nullptr)));
  EXPECT_TRUE(invalid(BiasActivationForward(
      fake, fake, int64_t{1} << 40, int64_t{1} << 40, BiasLayout::kPerRow,
      Activation::kRelu, fake, nullptr)));
  EXPECT_TRUE(invalid(
      BiasActivationBackward(fake, fake, 2, 4, BiasLayout::kPerColumn,
                             static_cast<Activation>(9), fake, fake, nullptr)));
  EXPECT_TRUE(invalid(
      BiasActivationBackward(fake, fake, 2, 4, BiasLayout::kPerColumn,
                             Activation::kRelu, nullptr, fake, nullptr)));
  EXPECT_TRUE(invalid(FloatToBf16(fake, nullptr, 5, nullptr)));
  EXPECT_TRUE(invalid(Fp16ToFloat(fake16, fake, -5, nullptr)));
  EXPECT_TRUE(
      invalid(DropoutForward(fake, fake, nullptr, 5, 1.0, 1, 0, nullptr)));
  EXPECT_TRUE(
      invalid(DropoutForward(fake, fake, nullptr, 5, -0.1, 1, 0, nullptr)));
  EXPECT_TRUE(invalid(DropoutBackward(
      fake, fake, 5, std::numeric_limits<double>::quiet_NaN(), 1, 0, nullptr)));
  // Nothing to do is fine, even with null pointers.
  EXPECT_TRUE(SgdStep(nullptr, nullptr, nullptr, 0, 0.1, {}, nullptr).ok());
  EXPECT_TRUE(FloatToFp16(nullptr, nullptr, 0, nullptr).ok());
  EXPECT_TRUE(
      DropoutForward(nullptr, nullptr, nullptr, 0, 0.5, 1, 0, nullptr).ok());
}

// The reference conversions agree with the CUDA headers' host
// implementations (the same functions the kernels call, compiled for the
// CPU): every bf16/fp16 encoding widened, and floats sampled across all
// 2^32 bit patterns (every 16th high half with varied low bits, plus a
// stride through the whole space) narrowed.
TEST(ReferenceConversions, MatchCudaHostConversions) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float bf = __bfloat162float(__ushort_as_bfloat16(bits));
    const float hf = __half2float(__ushort_as_half(bits));
    if (std::isnan(bf)) {
      ASSERT_TRUE(std::isnan(FloatFromBf16(bits)));
    } else {
      ASSERT_EQ(FloatFromBf16(bits), bf) << std::hex << h;
    }
    if (std::isnan(hf)) {
      ASSERT_TRUE(std::isnan(FloatFromFp16(bits)));
    } else {
      ASSERT_EQ(FloatFromFp16(bits), hf) << std::hex << h;
    }
  }
  auto check = [](uint32_t u) {
    const float x = FloatOf(u);
    const uint16_t bf = __bfloat16_as_ushort(__float2bfloat16_rn(x));
    const uint16_t hf = __half_as_ushort(__float2half_rn(x));
    if (Bf16FromFloat(x) != bf || Fp16FromFloat(x) != hf) {
      ADD_FAILURE() << "float bits 0x" << std::hex << u << ": bf16 0x"
                    << Bf16FromFloat(x) << " vs CUDA 0x" << bf << ", fp16 0x"
                    << Fp16FromFloat(x) << " vs CUDA 0x" << hf;
      return false;
    }
    return true;
  };
  int failures = 0;
  for (uint64_t u = 0; u <= 0xffffffffu && failures < 10; u += 65537) {
    failures += !check(static_cast<uint32_t>(u));
  }
  for (uint32_t high = 0; high <= 0xffff && failures < 10; ++high) {
    for (uint32_t low : {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x7fffu,
                         0x8000u, 0x8001u, 0xefffu, 0xf000u, 0xffffu}) {
      failures += !check(high << 16 | low);
    }
  }
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace gpu
}  // namespace cohort

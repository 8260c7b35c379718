// The sequence kernels (kernels/cuda/sequence_ops.h) against plain CPU
// references written from their definitions in double: embedding lookup
// and its scatter-add (overwrite and accumulate), the positional embedding
// and its gradient, the per-position LayerNorm forward and backward, and
// float targets as labels. Skips without a GPU (but for the argument
// checks, which run before any device call).
#include "kernels/cuda/sequence_ops.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/require_gpus.h"

namespace cohort {
namespace gpu {
namespace {

template <typename T>
class Buffer {
 public:
  explicit Buffer(const std::vector<T>& host) : n_(host.size()) {
    EXPECT_EQ(cudaMalloc(&ptr_, std::max<size_t>(1, n_) * sizeof(T)),
              cudaSuccess);
    EXPECT_EQ(
        cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice),
        cudaSuccess);
    // A pageable copy may still be landing when cudaMemcpy returns.
    cudaDeviceSynchronize();
  }
  ~Buffer() { cudaFree(ptr_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  T* get() const { return static_cast<T*>(ptr_); }
  std::vector<T> ToHost() const {
    std::vector<T> out(n_);
    EXPECT_EQ(
        cudaMemcpy(out.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost),
        cudaSuccess);
    return out;
  }

 private:
  size_t n_;
  void* ptr_ = nullptr;
};

std::vector<float> Values(int64_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 12345;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    v[i] = static_cast<float>(s >> 8) / 8388608.0f - 1.0f;  // [-1, 1)
  }
  return v;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want,
                double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(want[i])))
        << what << " element " << i;
  }
}

class SequenceOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_GPU();
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
              cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  void Sync() { ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess); }
  cudaStream_t stream_ = nullptr;
};

TEST_F(SequenceOpsTest, EmbeddingLooksUpAndScatterAdds) {
  const SequenceShape s{3, 5, 7};
  const int64_t vocab = 4;  // few ids: many repeats in the scatter
  std::vector<float> ids(s.n * s.l);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = (i * 7 + 3) % vocab;
  ids[4] = 9;  // out of range: zeros, and no gradient
  const std::vector<float> weight = Values(vocab * s.d, 1);
  const std::vector<float> dy = Values(s.n * s.d * s.l, 2);
  const std::vector<float> base = Values(vocab * s.d, 3);
  Buffer<float> d_ids(ids), d_w(weight), d_out(dy), d_dy(dy), d_g(base);
  const size_t ws_bytes = EmbeddingBackwardWorkspaceBytes(s.n * s.l, vocab);
  Buffer<double> ws(std::vector<double>(ws_bytes / 8 + 1));
  ASSERT_TRUE(
      EmbeddingForward(s, vocab, d_ids.get(), d_w.get(), d_out.get(), stream_)
          .ok());
  Sync();
  std::vector<double> want(dy.size());
  std::vector<double> grad(vocab * s.d, 0.0);
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t d = 0; d < s.d; ++d) {
      for (int64_t t = 0; t < s.l; ++t) {
        const int64_t i = (n * s.d + d) * s.l + t;
        const int64_t id = static_cast<int64_t>(ids[n * s.l + t]);
        want[i] = id < vocab ? weight[id * s.d + d] : 0.0;
        if (id < vocab) grad[id * s.d + d] += dy[i];
      }
    }
  }
  ExpectNear(d_out.ToHost(), want, 0, "lookup");
  ASSERT_TRUE(EmbeddingBackward(s, vocab, d_ids.get(), d_dy.get(), d_g.get(),
                                /*accumulate=*/false, ws.get(), ws_bytes,
                                stream_)
                  .ok());
  Sync();
  ExpectNear(d_g.ToHost(), grad, 1e-6, "scatter-add");
  // Accumulating (weight tying) adds onto what is there.
  ASSERT_TRUE(EmbeddingBackward(s, vocab, d_ids.get(), d_dy.get(), d_g.get(),
                                /*accumulate=*/true, ws.get(), ws_bytes,
                                stream_)
                  .ok());
  Sync();
  for (double& g : grad) g *= 2;
  const std::vector<float> twice = d_g.ToHost();
  ExpectNear(twice, grad, 1e-6, "accumulated scatter-add");
  // Deterministic: the same sums again give the same bits.
  ASSERT_TRUE(EmbeddingBackward(s, vocab, d_ids.get(), d_dy.get(), d_g.get(),
                                /*accumulate=*/false, ws.get(), ws_bytes,
                                stream_)
                  .ok());
  ASSERT_TRUE(EmbeddingBackward(s, vocab, d_ids.get(), d_dy.get(), d_g.get(),
                                /*accumulate=*/true, ws.get(), ws_bytes,
                                stream_)
                  .ok());
  Sync();
  EXPECT_EQ(d_g.ToHost(), twice);
  // Too small a workspace is refused before anything runs.
  EXPECT_EQ(EmbeddingBackward(s, vocab, d_ids.get(), d_dy.get(), d_g.get(),
                              false, ws.get(), ws_bytes / 2, stream_)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SequenceOpsTest, PositionalEmbeddingAddsAndSumsOverSamples) {
  const SequenceShape s{4, 6, 9};
  const std::vector<float> x = Values(s.n * s.d * s.l, 4);
  const std::vector<float> w = Values(s.l * s.d, 5);
  Buffer<float> d_x(x), d_w(w), d_out(x), d_g(w);
  ASSERT_TRUE(
      PositionalForward(s, d_x.get(), d_w.get(), d_out.get(), stream_).ok());
  ASSERT_TRUE(PositionalWeightGrad(s, d_x.get(), d_g.get(), stream_).ok());
  Sync();
  std::vector<double> want(x.size()), grad(w.size(), 0.0);
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t d = 0; d < s.d; ++d) {
      for (int64_t t = 0; t < s.l; ++t) {
        const int64_t i = (n * s.d + d) * s.l + t;
        want[i] = static_cast<double>(x[i]) + w[t * s.d + d];
        grad[t * s.d + d] += x[i];
      }
    }
  }
  ExpectNear(d_out.ToHost(), want, 1e-7, "forward");
  ExpectNear(d_g.ToHost(), grad, 1e-6, "weight gradient");
}

TEST_F(SequenceOpsTest, PositionNormMatchesTheDefinition) {
  for (const bool affine : {true, false}) {
    const SequenceShape s{3, 24, 13};
    const float eps = 1e-5f;
    std::vector<float> x = Values(s.n * s.d * s.l, 6);
    for (size_t i = 0; i < x.size(); ++i) x[i] = x[i] * 3 + (i % 5);
    const std::vector<float> w = Values(s.d, 7), b = Values(s.d, 8);
    const std::vector<float> dy = Values(x.size(), 9);
    Buffer<float> d_x(x), d_w(w), d_b(b), d_y(x), d_dy(dy), d_dx(x);
    Buffer<float> d_mean(std::vector<float>(s.n * s.l)),
        d_invstd(std::vector<float>(s.n * s.l));
    Buffer<float> d_gw(w), d_gb(b);
    const float* wp = affine ? d_w.get() : nullptr;
    const float* bp = affine ? d_b.get() : nullptr;
    ASSERT_TRUE(PositionNormForward(s, eps, d_x.get(), wp, bp, d_y.get(),
                                    d_mean.get(), d_invstd.get(), stream_)
                    .ok());
    ASSERT_TRUE(PositionNormBackward(s, d_x.get(), d_dy.get(), wp, d_mean.get(),
                                     d_invstd.get(), d_dx.get(), d_gw.get(),
                                     d_gb.get(), stream_)
                    .ok());
    Sync();
    std::vector<double> y(x.size()), dx(x.size()), gw(s.d, 0.0), gb(s.d, 0.0);
    for (int64_t n = 0; n < s.n; ++n) {
      for (int64_t t = 0; t < s.l; ++t) {
        auto at = [&](int64_t d) { return (n * s.d + d) * s.l + t; };
        double mean = 0, var = 0;
        for (int64_t d = 0; d < s.d; ++d) mean += x[at(d)];
        mean /= s.d;
        for (int64_t d = 0; d < s.d; ++d) {
          var += (x[at(d)] - mean) * (x[at(d)] - mean);
        }
        const double is = 1 / std::sqrt(var / s.d + eps);
        double s1 = 0, s2 = 0;
        for (int64_t d = 0; d < s.d; ++d) {
          const double xh = (x[at(d)] - mean) * is;
          const double wd = affine ? w[d] : 1.0;
          y[at(d)] = affine ? xh * w[d] + b[d] : xh;
          s1 += dy[at(d)] * wd;
          s2 += dy[at(d)] * wd * xh;
          gw[d] += dy[at(d)] * xh;
          gb[d] += dy[at(d)];
        }
        for (int64_t d = 0; d < s.d; ++d) {
          const double xh = (x[at(d)] - mean) * is;
          const double wd = affine ? w[d] : 1.0;
          dx[at(d)] = is * (dy[at(d)] * wd - s1 / s.d - xh * s2 / s.d);
        }
      }
    }
    SCOPED_TRACE(affine ? "affine" : "no affine");
    ExpectNear(d_y.ToHost(), y, 1e-5, "forward");
    ExpectNear(d_dx.ToHost(), dx, 1e-5, "input gradient");
    if (affine) {
      ExpectNear(d_gw.ToHost(), gw, 1e-5, "weight gradient");
      ExpectNear(d_gb.ToHost(), gb, 1e-5, "bias gradient");
    }
  }
}

TEST_F(SequenceOpsTest, FloatTargetsBecomeLabels) {
  const std::vector<float> targets = {0, 3, 255, -1, 2.5f, 1e10f, 7};
  Buffer<float> d_t(targets);
  Buffer<int32_t> d_l(std::vector<int32_t>(targets.size(), 99));
  ASSERT_TRUE(
      FloatTargetsToLabels(d_t.get(), d_l.get(), targets.size(), stream_).ok());
  Sync();
  EXPECT_EQ(d_l.ToHost(), (std::vector<int32_t>{0, 3, 255, -1, -1, -1, 7}));
}

TEST(SequenceOpsArgumentsTest, RefusesBadShapes) {
  float f = 0;
  EXPECT_EQ(EmbeddingForward({2, 0, 3}, 5, &f, &f, &f, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EmbeddingForward({2, 4, 3}, 0, &f, &f, &f, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      PositionNormForward({2, 4, 3}, 0.0f, &f, &f, &f, &f, &f, &f, nullptr)
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PositionNormForward({2, 4, 3}, 1e-5f, &f, &f, nullptr, &f, &f, &f,
                                nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PositionNormBackward({2, 4, 3}, &f, &f, nullptr, &f, &f, &f,
                                 nullptr, nullptr, nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);  // dx is dy
}

}  // namespace
}  // namespace gpu
}  // namespace cohort

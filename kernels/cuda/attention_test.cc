// The tiled attention kernels (kernels/cuda/attention.h) against a plain
// double-precision CPU reference that builds the whole score matrix:
// causal and bidirectional, 1, 2 and 4 heads, L = 1, 7, 64, 130 (every
// combination) and 1000 (a few), head dims 8, 32, 64 and 128, in both
// layouts; the output, the logsumexp
// and the gradients of Q, K and V. Skips without a GPU (but for the
// argument checks, which run before any device call).
#include "kernels/cuda/attention.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cuda/require_gpus.h"

namespace cohort {
namespace gpu {
namespace {

class Buffer {
 public:
  explicit Buffer(const std::vector<float>& host) : n_(host.size()) {
    EXPECT_EQ(cudaMalloc(&ptr_, std::max<size_t>(1, n_) * sizeof(float)),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr_, host.data(), n_ * sizeof(float),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    // A pageable copy may still be landing when cudaMemcpy returns.
    cudaDeviceSynchronize();
  }
  // NaN-filled, so that an element the kernels forget shows.
  explicit Buffer(size_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(&ptr_, std::max<size_t>(1, n_) * sizeof(float)),
              cudaSuccess);
    EXPECT_EQ(cudaMemset(ptr_, 0xff, n_ * sizeof(float)), cudaSuccess);
  }
  ~Buffer() { cudaFree(ptr_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* get() const { return static_cast<float*>(ptr_); }
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

std::vector<float> Values(int64_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 12345;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    v[i] = static_cast<float>(s >> 8) / 8388608.0f - 1.0f;  // [-1, 1)
  }
  return v;
}

struct Reference {
  std::vector<double> out, lse, grad_qkv;
};

// Attention as its definition reads, over the geometry's strides.
Reference Compute(const AttentionGeometry& g, const std::vector<float>& qkv,
                  const std::vector<float>& dout) {
  const int64_t dh = g.head_dim, d_model = g.heads * dh, l = g.l;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  auto at = [&](int64_t f, int64_t n, int64_t t) {
    return f * g.qkv_feature_stride + n * g.qkv_sample_stride + t;
  };
  auto out_at = [&](int64_t f, int64_t n, int64_t t) {
    return f * g.out_feature_stride + n * g.out_sample_stride + t;
  };
  Reference r;
  r.out.assign(qkv.size() / 3, 0.0);
  r.lse.assign(g.n * g.heads * l, 0.0);
  r.grad_qkv.assign(qkv.size(), 0.0);
  std::vector<double> p(l), dp(l);
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t h = 0; h < g.heads; ++h) {
      const int64_t qf = h * dh, kf = d_model + h * dh,
                    vf = 2 * d_model + h * dh;
      for (int64_t t = 0; t < l; ++t) {
        const int64_t last = g.causal ? t : l - 1;
        double m = -INFINITY;
        for (int64_t u = 0; u <= last; ++u) {
          double s = 0;
          for (int64_t d = 0; d < dh; ++d) {
            s += static_cast<double>(qkv[at(qf + d, n, t)]) *
                 qkv[at(kf + d, n, u)];
          }
          p[u] = s * scale;
          m = std::max(m, p[u]);
        }
        double sum = 0;
        for (int64_t u = 0; u <= last; ++u) sum += std::exp(p[u] - m);
        for (int64_t u = 0; u <= last; ++u) p[u] = std::exp(p[u] - m) / sum;
        r.lse[(n * g.heads + h) * l + t] = m + std::log(sum);
        double di = 0;
        for (int64_t d = 0; d < dh; ++d) {
          double o = 0;
          for (int64_t u = 0; u <= last; ++u) o += p[u] * qkv[at(vf + d, n, u)];
          r.out[out_at(qf + d, n, t)] = o;
          di += o * dout[out_at(qf + d, n, t)];
        }
        for (int64_t u = 0; u <= last; ++u) {
          double x = 0;
          for (int64_t d = 0; d < dh; ++d) {
            x += static_cast<double>(dout[out_at(qf + d, n, t)]) *
                 qkv[at(vf + d, n, u)];
          }
          dp[u] = p[u] * (x - di);  // dS
        }
        for (int64_t u = 0; u <= last; ++u) {
          for (int64_t d = 0; d < dh; ++d) {
            r.grad_qkv[at(qf + d, n, t)] +=
                scale * dp[u] * qkv[at(kf + d, n, u)];
            r.grad_qkv[at(kf + d, n, u)] +=
                scale * dp[u] * qkv[at(qf + d, n, t)];
            r.grad_qkv[at(vf + d, n, u)] += p[u] * dout[out_at(qf + d, n, t)];
          }
        }
      }
    }
  }
  return r;
}

// Largest |got - want| over the largest |want| (1 when that is small).
void ExpectClose(const std::vector<float>& got, const std::vector<double>& want,
                 double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1, worst = 0;
  int64_t worst_at = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(got[i] - want[i]);
    if (!(e <= worst)) {  // NaN counts as worst
      worst = std::isnan(e) ? INFINITY : e;
      worst_at = static_cast<int64_t>(i);
    }
  }
  EXPECT_LE(worst / scale, tol) << what << ": element " << worst_at << " is "
                                << got[worst_at] << ", want " << want[worst_at];
}

struct Case {
  bool causal;
  int64_t heads, l, head_dim;
};

void RunCase(const Case& c, bool channel_major, cudaStream_t stream) {
  const int64_t n = c.l >= 1000 ? 1 : 2;
  const AttentionGeometry g =
      channel_major
          ? ChannelMajorAttention(n, c.l, c.heads, c.head_dim, c.causal)
          : SampleMajorAttention(n, c.l, c.heads, c.head_dim, c.causal);
  const std::string what = absl::StrCat(
      c.causal ? "causal" : "bidirectional", " heads ", c.heads, " L ", c.l,
      " head_dim ", c.head_dim, channel_major ? " {3D, N, L}" : " {N, 3D, L}");
  SCOPED_TRACE(what);
  const int64_t d_model = c.heads * c.head_dim;
  const std::vector<float> qkv = Values(3 * d_model * n * c.l, 7);
  const std::vector<float> dout = Values(d_model * n * c.l, 11);
  Buffer d_qkv(qkv), d_dout(dout), d_out(dout.size()),
      d_lse(AttentionRowCount(g)), d_delta(AttentionRowCount(g)),
      d_grad(qkv.size());
  ASSERT_TRUE(
      AttentionForward(g, d_qkv.get(), d_out.get(), d_lse.get(), stream).ok());
  ASSERT_TRUE(AttentionBackward(g, d_qkv.get(), d_out.get(), d_dout.get(),
                                d_lse.get(), d_delta.get(), d_grad.get(),
                                stream)
                  .ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const Reference want = Compute(g, qkv, dout);
  ExpectClose(d_out.ToHost(), want.out, 2e-5, "output");
  ExpectClose(d_lse.ToHost(), want.lse, 2e-5, "logsumexp");
  ExpectClose(d_grad.ToHost(), want.grad_qkv, 5e-5, "grad qkv");

  // Deterministic: a second backward gives the same bits.
  const std::vector<float> first = d_grad.ToHost();
  ASSERT_TRUE(AttentionBackward(g, d_qkv.get(), d_out.get(), d_dout.get(),
                                d_lse.get(), d_delta.get(), d_grad.get(),
                                stream)
                  .ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const std::vector<float> second = d_grad.ToHost();
  EXPECT_EQ(0, std::memcmp(first.data(), second.data(),
                           first.size() * sizeof(float)));
}

class AttentionTest : public ::testing::Test {
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
  cudaStream_t stream_ = nullptr;
};

TEST_F(AttentionTest, MatchesReferenceUpToL130) {
  for (bool causal : {true, false}) {
    for (int64_t heads : {1, 2, 4}) {
      for (int64_t l : {1, 7, 64, 130}) {
        for (int64_t dh : {8, 32, 64, 128}) {
          RunCase({causal, heads, l, dh}, /*channel_major=*/true, stream_);
          RunCase({causal, heads, l, dh}, /*channel_major=*/false, stream_);
        }
      }
    }
  }
}

// L = 1000 (31 full tiles and a partial one): each head count and head
// dimension once per mask, so that the double reference stays a few
// seconds (tools/gpu-check gives each test 150 s).
TEST_F(AttentionTest, MatchesReferenceAtL1000) {
  struct HeadsAndDim {
    int64_t heads, head_dim;
  };
  for (bool causal : {true, false}) {
    for (const HeadsAndDim& h : {HeadsAndDim{1, 8}, HeadsAndDim{1, 128},
                                 HeadsAndDim{2, 64}, HeadsAndDim{4, 32}}) {
      RunCase({causal, h.heads, 1000, h.head_dim},
              /*channel_major=*/h.heads != 2, stream_);
    }
  }
}

// The checks come before any device call: they run without a GPU too.
TEST(AttentionArgumentsTest, RefusesWhatItCannotRun) {
  float dummy = 0;
  AttentionGeometry g = ChannelMajorAttention(2, 8, 2, 129, true);
  absl::Status s = AttentionForward(g, &dummy, &dummy, &dummy, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("head_dim 129"), std::string::npos) << s;
  g = ChannelMajorAttention(2, 0, 2, 16, true);
  EXPECT_EQ(AttentionForward(g, &dummy, &dummy, &dummy, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  g = ChannelMajorAttention(2, 8, 2, 16, false);
  EXPECT_EQ(AttentionBackward(g, &dummy, &dummy, &dummy, &dummy, &dummy, &dummy,
                              nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);  // grad_qkv is qkv
  EXPECT_EQ(AttentionForward(g, nullptr, &dummy, &dummy, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpu
}  // namespace cohort

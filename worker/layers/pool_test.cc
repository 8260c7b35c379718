#include "worker/layers/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/onednn_threads.h"
#include "worker/layers/grad_check.h"

namespace cohort {
namespace {

// Naive max pool of one {C, N, H, W} tensor, for checking the kernels:
// returns the outputs and, per output, the flat input index of its first
// maximum.
struct Reference {
  std::vector<float> out;
  std::vector<int64_t> where;
};

Reference NaiveMaxPool(const Tensor& in, int64_t k, int64_t s, int64_t p) {
  const int64_t planes = in.dim(0) * in.dim(1), h = in.dim(2), w = in.dim(3);
  const int64_t oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
  Reference r;
  for (int64_t q = 0; q < planes; ++q) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        float best = -std::numeric_limits<float>::infinity();
        int64_t at = -1;
        for (int64_t y = i * s - p; y < i * s - p + k; ++y) {
          for (int64_t x = j * s - p; x < j * s - p + k; ++x) {
            if (y < 0 || y >= h || x < 0 || x >= w) continue;
            const int64_t idx = (q * h + y) * w + x;
            if (at < 0 || in[idx] > best) best = in[idx], at = idx;
          }
        }
        r.out.push_back(best);
        r.where.push_back(at);
      }
    }
  }
  return r;
}

Tensor RandomTensor(const Shape& shape, uint64_t seed) {
  Tensor t(shape);
  Rng rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < t.size(); ++i) t[i] = normal(rng);
  return t;
}

// Forward and backward of a float MaxPool2d against the naive pool: the
// gradient of output o must land exactly on its argmax.
void ExpectMatchesNaive(const Tensor& in, PoolOptions o) {
  MaxPool2d<float> pool(o);
  ASSERT_TRUE(pool.Configure({in.dim(0), in.dim(2), in.dim(3)}).ok());
  Tensor out, grad_in;
  pool.Forward(in, &out, Mode::kTrain);
  const int64_t stride = o.stride == 0 ? o.kernel : o.stride;
  const Reference ref = NaiveMaxPool(in, o.kernel, stride, o.padding);
  ASSERT_EQ(out.size(), static_cast<int64_t>(ref.out.size()));
  Tensor grad_out(out.shape());
  for (int64_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(out[i], ref.out[i]) << "output " << i;
    grad_out[i] = 1.0f + i;
  }
  grad_in.Resize(in.shape());
  grad_in.Fill(123.0f);  // stale values must be overwritten
  pool.Backward(grad_out, &grad_in);
  std::vector<float> expected(in.size(), 0.0f);
  for (int64_t i = 0; i < out.size(); ++i) expected[ref.where[i]] += 1.0f + i;
  for (int64_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(grad_in[i], expected[i]) << "input " << i;
  }
}

TEST(MaxPool2d, TwoByTwoMatchesNaiveWithVectorAndTail) {
  // W = 38 gives 19 outputs per row (two 8-wide vectors and a tail); odd H
  // and W leave a row and a column that no window covers.
  ExpectMatchesNaive(RandomTensor({3, 2, 9, 38}, 1), {2, 2, 0});
  ExpectMatchesNaive(RandomTensor({2, 3, 10, 39}, 2), {2, 0, 0});
  ExpectMatchesNaive(RandomTensor({6, 4, 28, 28}, 3), {2, 2, 0});
}

TEST(MaxPool2d, TwoByTwoMatchesNaiveForEveryTailLength) {
  // Tails of 1..7 outputs after 0, 1 or 2 full vectors, even and odd widths.
  for (int64_t out_w = 1; out_w <= 23; ++out_w) {
    for (int64_t extra : {0, 1}) {
      SCOPED_TRACE(out_w * 2 + extra);
      ExpectMatchesNaive(RandomTensor({2, 2, 4, out_w * 2 + extra}, out_w),
                         {2, 2, 0});
    }
  }
}

TEST(MaxPool2d, GeneralGeometriesMatchNaive) {
  ExpectMatchesNaive(RandomTensor({2, 3, 11, 13}, 4), {3, 2, 1});
  ExpectMatchesNaive(RandomTensor({2, 2, 8, 8}, 5), {3, 1, 0});
  ExpectMatchesNaive(RandomTensor({1, 2, 7, 9}, 6), {2, 1, 1});
}

TEST(MaxPool2d, WideRowsMatchNaiveOnEveryStride) {
  // Rows wide enough for eight-lane blocks between the clipped windows at
  // either end: strides 1 and 2 (their own loads) and 3 (gathers), widths
  // that leave a tail of scalar windows and ones that end on a block.
  struct Case {
    PoolOptions options;
    int64_t h, w;
  };
  const Case cases[] = {{{3, 2, 1}, 12, 40}, {{3, 2, 1}, 9, 35},
                        {{3, 1, 1}, 7, 37},  {{3, 1, 0}, 5, 18},
                        {{3, 3, 0}, 6, 50},  {{5, 2, 2}, 11, 45},
                        {{2, 1, 0}, 4, 33},  {{3, 2, 0}, 7, 33}};
  uint64_t seed = 10;
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message()
                 << c.options.kernel << "/" << c.options.stride << "/"
                 << c.options.padding << " " << c.w);
    ExpectMatchesNaive(RandomTensor({2, 3, c.h, c.w}, seed++), c.options);
  }
}

TEST(MaxPool2d, WideRowsAfterReluSendTiesToTheFirstElement) {
  // A ReLU before the pool (ResNet's stem) leaves windows of zeros: the
  // gradient must go to each window's first zero, as PyTorch sends it.
  Tensor in = RandomTensor({2, 2, 14, 50}, 20);
  for (int64_t i = 0; i < in.size(); ++i) in[i] = std::max(in[i], 0.0f);
  ExpectMatchesNaive(in, {3, 2, 1});
  in.Fill(0.0f);
  ExpectMatchesNaive(in, {3, 2, 1});
  ExpectMatchesNaive(in, {3, 3, 0});
}

TEST(MaxPool2d, PaddingNeverWins) {
  // ResNet-50's stem pool (k3 s2 p1) over negative inputs: PyTorch pads
  // with -inf, so a border window's maximum is a real element, never 0.
  MaxPool2d<float> pool({3, 2, 1});
  ASSERT_TRUE(pool.Configure({1, 4, 4}).ok());
  Tensor in({1, 1, 4, 4});
  for (int64_t i = 0; i < 16; ++i) in[i] = -1.0f - i;
  Tensor out;
  pool.Forward(in, &out, Mode::kTrain);
  ASSERT_EQ(out.shape(), Shape({1, 1, 2, 2}));
  // Windows rows/cols [-1, 1] and [1, 3]: their top-left real elements.
  EXPECT_EQ(out[0], -1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], -5.0f);
  EXPECT_EQ(out[3], -6.0f);
}

TEST(MaxPool2d, TiesGoToTheFirstElementOfTheWindow) {
  // PyTorch keeps the first maximum in row-major window order.
  for (int64_t w : {4, 20}) {  // scalar-only and vector path
    Tensor in({1, 1, 2, w});
    in.Fill(1.0f);
    MaxPool2d<float> pool({2, 2, 0});
    ASSERT_TRUE(pool.Configure({1, 2, w}).ok());
    Tensor out, grad_in;
    pool.Forward(in, &out, Mode::kTrain);
    Tensor grad_out(out.shape());
    grad_out.Fill(1.0f);
    pool.Backward(grad_out, &grad_in);
    for (int64_t j = 0; j < w; ++j) {
      EXPECT_EQ(grad_in[j], j % 2 == 0 ? 1.0f : 0.0f) << w << " " << j;
      EXPECT_EQ(grad_in[w + j], 0.0f) << w << " " << j;
    }
  }
}

TEST(MaxPool2d, HandComputedValues) {
  MaxPool2d<double> pool({2, 2, 0});
  absl::StatusOr<Shape> shape = pool.Configure({1, 4, 4});
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(*shape, Shape({1, 2, 2}));
  TensorD in({1, 1, 4, 4});
  const double v[] = {1, 5, 2, 0, 3, 4, 8, 1, -1, -2, 0, 0, -3, -4, 7, 9};
  for (int i = 0; i < 16; ++i) in[i] = v[i];
  TensorD out;
  pool.Forward(in, &out, Mode::kEval);
  ASSERT_EQ(out.shape(), Shape({1, 1, 2, 2}));
  EXPECT_EQ(out[0], 5);
  EXPECT_EQ(out[1], 8);
  EXPECT_EQ(out[2], -1);
  EXPECT_EQ(out[3], 9);
}

TEST(MaxPool2d, WideTwoByTwoGradientsMatchFiniteDifferences) {
  // Rows of 9 outputs take the row-wise 2x2 backward, not the scatter.
  MaxPool2d<double> pool({2, 2, 0});
  const absl::Status s = CheckLayerGradients(pool, {2, 5, 19}, {2, 2, 5, 19});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(MaxPool2d, GradientsMatchFiniteDifferences) {
  for (PoolOptions o : {PoolOptions{2, 2, 0}, PoolOptions{3, 2, 1},
                        PoolOptions{2, 1, 0}, PoolOptions{3, 3, 1}}) {
    MaxPool2d<double> pool(o);
    const absl::Status s = CheckLayerGradients(pool, {2, 7, 9}, {2, 3, 7, 9});
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(MaxPool2d, RejectsBadOptionsAndShapes) {
  struct Case {
    PoolOptions options;
    Shape in;
    const char* message;
  };
  const Case cases[] = {
      {{0, 0, 0}, {1, 4, 4}, "kernel must be at least 1, got 0"},
      {{2, -1, 0}, {1, 4, 4}, "stride must be at least 1, got -1"},
      {{2, 2, 2}, {1, 4, 4}, "padding must be in [0, kernel / 2], got 2"},
      {{2, 2, 0}, {4, 4}, "expected a per-sample input of shape [C, H, W]"},
      {{5, 1, 1}, {1, 2, 9}, "kernel does not fit the padded input 4x11"},
  };
  for (const Case& c : cases) {
    MaxPool2d<float> pool(c.options);
    const absl::StatusOr<Shape> r = pool.Configure(c.in);
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << r.status();
  }
}

TEST(AvgPool2d, PaddingCountsInTheDivisor) {
  AvgPool2d<double> pool({2, 2, 1});
  absl::StatusOr<Shape> shape = pool.Configure({1, 2, 2});
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(*shape, Shape({1, 2, 2}));
  TensorD in({1, 1, 2, 2});
  for (int i = 0; i < 4; ++i) in[i] = i + 1;  // [[1, 2], [3, 4]]
  TensorD out;
  pool.Forward(in, &out, Mode::kTrain);
  // Each window holds one real element and three padding zeros.
  EXPECT_DOUBLE_EQ(out[0], 0.25);
  EXPECT_DOUBLE_EQ(out[1], 0.5);
  EXPECT_DOUBLE_EQ(out[2], 0.75);
  EXPECT_DOUBLE_EQ(out[3], 1.0);
}

TEST(AvgPool2d, GradientsMatchFiniteDifferences) {
  for (PoolOptions o :
       {PoolOptions{2, 2, 0}, PoolOptions{3, 2, 1}, PoolOptions{2, 1, 1}}) {
    AvgPool2d<double> pool(o);
    const absl::Status s = CheckLayerGradients(pool, {2, 5, 6}, {2, 3, 5, 6});
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(GlobalAvgPool, AveragesEachPlaneIntoDenseOutput) {
  GlobalAvgPool<float> pool;
  absl::StatusOr<Shape> shape = pool.Configure({2, 2, 3});
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(*shape, Shape({2}));
  Tensor in({2, 3, 2, 3});  // C = 2, N = 3
  for (int64_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  Tensor out;
  pool.Forward(in, &out, Mode::kTrain);
  ASSERT_EQ(out.shape(), Shape({3, 2}));
  // Plane (c, n) holds 6 consecutive values starting at 6 * (c * 3 + n).
  for (int n = 0; n < 3; ++n) {
    for (int c = 0; c < 2; ++c) {
      EXPECT_FLOAT_EQ(out[n * 2 + c], 6.0f * (c * 3 + n) + 2.5f);
    }
  }
}

TEST(GlobalAvgPool, GradientsMatchFiniteDifferences) {
  GlobalAvgPool<double> pool;
  absl::Status s = CheckLayerGradients(pool, {3, 4, 5}, {3, 2, 4, 5});
  EXPECT_TRUE(s.ok()) << s;
  GlobalAvgPool<double> pool1d;
  s = CheckLayerGradients(pool1d, {3, 7}, {3, 2, 7});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(GlobalAvgPool, RejectsDenseInput) {
  GlobalAvgPool<float> pool;
  EXPECT_EQ(pool.Configure({10}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Planes go to the compute threads; every output bit stays the same.
template <typename Pool>
std::vector<float> PoolOnThreads(int threads, PoolOptions o) {
  SetOnednnThreads(threads);
  Pool pool(o);
  const int64_t c = 64, n = 4;
  EXPECT_TRUE(pool.Configure({c, 32, 32}).ok());
  Tensor x({c, n, 32, 32}), y, dx;
  for (int64_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>((i * 7919) % 1013) * 0.01f - 5.0f;
  }
  pool.Forward(x, &y, Mode::kTrain);
  Tensor dy(y.shape());
  for (int64_t i = 0; i < dy.size(); ++i) {
    dy[i] = static_cast<float>((i * 104729) % 997) * 0.002f - 1.0f;
  }
  pool.Backward(dy, &dx);
  std::vector<float> all(y.data(), y.data() + y.size());
  all.insert(all.end(), dx.data(), dx.data() + dx.size());
  SetOnednnThreads(0);
  return all;
}

TEST(Pool2d, SameBitsOnOneAndTwoThreads) {
  const PoolOptions stem{3, 2, 1}, pairs{2, 2, 0};
  EXPECT_EQ(PoolOnThreads<MaxPool2d<float>>(1, stem),
            PoolOnThreads<MaxPool2d<float>>(2, stem));
  EXPECT_EQ(PoolOnThreads<MaxPool2d<float>>(1, pairs),
            PoolOnThreads<MaxPool2d<float>>(2, pairs));
  EXPECT_EQ(PoolOnThreads<AvgPool2d<float>>(1, stem),
            PoolOnThreads<AvgPool2d<float>>(2, stem));
}

}  // namespace
}  // namespace cohort

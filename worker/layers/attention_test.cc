// Attention, per-position LayerNorm and the transformer block: gradients
// against finite differences (double), shape errors, dropout, and the float
// kernels against the double ones. tests/attention_torch_test compares them
// with PyTorch.
#include "worker/layers/attention.h"

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/onednn_threads.h"
#include "worker/layers/grad_check.h"
#include "worker/layers/norm.h"
#include "worker/layers/param_store.h"
#include "worker/layers/transformer_block.h"

namespace cohort {
namespace {

TEST(Attention, GradientsMatchFiniteDifferences) {
  struct Case {
    int64_t d, heads, len, n;
    bool causal;
  };
  // 70 positions: two query blocks, the second partial.
  for (const Case& c : {Case{8, 2, 7, 2, true}, Case{4, 1, 5, 3, false},
                        Case{4, 2, 70, 1, true}, Case{6, 3, 70, 1, false}}) {
    Attention<double> attn({c.heads, c.causal, 0.0});
    absl::Status s = CheckLayerGradients(attn, {c.d, c.len}, {c.d, c.n, c.len});
    EXPECT_TRUE(s.ok()) << attn.Name() << " L=" << c.len << ": " << s;
  }
}

TEST(Attention, RefusesBadShapes) {
  Attention<double> three({3, true, 0.0});
  EXPECT_EQ(three.Configure({8, 5}).status().code(),
            absl::StatusCode::kInvalidArgument);
  Attention<double> two({2, true, 0.0});
  EXPECT_FALSE(two.Configure({8}).ok());
  EXPECT_FALSE(two.Configure({8, 4, 4}).ok());
  EXPECT_TRUE(two.Configure({8, 4}).ok());
  Attention<double> bad_p({2, true, 1.0});
  EXPECT_FALSE(bad_p.Configure({8, 4}).ok());
}

TEST(LayerNormPerPosition, GradientsMatchFiniteDifferences) {
  NormOptions o;
  o.per_position = true;
  LayerNorm<double> ln(o);
  absl::Status s = CheckLayerGradients(ln, {6, 5}, {6, 3, 5});
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_FALSE(LayerNorm<double>(o).Configure({6}).ok());
  EXPECT_FALSE(LayerNorm<double>(o).Configure({6, 2, 2}).ok());
}

TEST(TransformerBlock, GradientsMatchFiniteDifferences) {
  for (bool causal : {true, false}) {
    TransformerBlockOptions o;
    o.heads = 2;
    o.mlp_ratio = 2;
    o.causal = causal;
    TransformerBlock<double> block(o);
    absl::Status s = CheckLayerGradients(block, {8, 5}, {8, 2, 5});
    EXPECT_TRUE(s.ok()) << block.Name() << ": " << s;
  }
  TransformerBlockOptions o;
  o.heads = 3;
  EXPECT_EQ(TransformerBlock<double>(o).Configure({8, 5}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Builds `layer` for {d, len}, initialises it, and fills `x` {d, n, len}.
template <typename T>
std::unique_ptr<ParamStore<T>> BuildRandom(Layer<T>& layer, int64_t d,
                                           int64_t n, int64_t len,
                                           BasicTensor<T>* x) {
  EXPECT_TRUE(layer.Configure({d, len}).ok());
  auto store = std::make_unique<ParamStore<T>>();
  Layer<T>* list[] = {&layer};
  store->Build(list);
  Rng rng(7);
  store->Initialize(rng);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int64_t i = 0; i < store->values().size(); ++i) {
    store->values()[i] += static_cast<T>(0.2 * normal(rng));
  }
  x->Resize({d, n, len});
  for (int64_t i = 0; i < x->size(); ++i) (*x)[i] = static_cast<T>(normal(rng));
  return store;
}

bool Same(const Tensor& a, const Tensor& b) {
  if (a.size() != b.size()) return false;
  for (int64_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

TEST(Attention, DropoutDropsAboutPInTrainingOnly) {
  Attention<float> attn({2, true, 0.25});
  Tensor x, train, eval1, eval2;
  auto store = BuildRandom<float>(attn, 8, 4, 96, &x);
  attn.SeedRandom(3);
  attn.Forward(x, &eval1, Mode::kEval);
  EXPECT_EQ(attn.KeptFraction(), 1.0);
  attn.Forward(x, &train, Mode::kTrain);
  // 4 * 2 * 96 * 97 / 2 = 37248 draws: the kept fraction's sd is ~0.0022.
  EXPECT_NEAR(attn.KeptFraction(), 0.75, 0.015);
  EXPECT_FALSE(Same(train, eval1));
  attn.SeedRandom(99);
  attn.Forward(x, &eval2, Mode::kEval);
  EXPECT_TRUE(Same(eval1, eval2));  // evaluation is deterministic

  // p = 0: training draws nothing and equals evaluation.
  Attention<float> none({2, true, 0.0});
  Tensor y, z;
  auto store0 = BuildRandom<float>(none, 8, 4, 96, &x);
  none.Forward(x, &y, Mode::kTrain);
  EXPECT_EQ(none.KeptFraction(), 1.0);
  none.Forward(x, &z, Mode::kEval);
  EXPECT_TRUE(Same(y, z));
}

TEST(TransformerBlock, DropoutOnlyInTraining) {
  TransformerBlockOptions o;
  o.heads = 2;
  o.dropout = 0.2;
  TransformerBlock<float> block(o);
  Tensor x, train, eval1, eval2;
  auto store = BuildRandom<float>(block, 8, 3, 20, &x);
  block.SeedRandom(5);
  block.Forward(x, &eval1, Mode::kEval);
  block.Forward(x, &train, Mode::kTrain);
  EXPECT_NEAR(block.attention().KeptFraction(), 0.8, 0.05);
  EXPECT_FALSE(Same(train, eval1));
  block.Forward(x, &eval2, Mode::kEval);
  EXPECT_TRUE(Same(eval1, eval2));
}

// The float path (small-GEMM kernels, the polynomial exp) against double,
// forward and backward, over several query blocks.
TEST(Attention, FloatMatchesDouble) {
  for (bool causal : {true, false}) {
    TransformerBlockOptions o;
    o.heads = 4;
    o.causal = causal;
    TransformerBlock<float> f(o);
    TransformerBlock<double> d(o);
    Tensor xf, yf, dxf;
    TensorD xd, yd, dxd;
    auto sf = BuildRandom<float>(f, 32, 2, 130, &xf);
    auto sd = BuildRandom<double>(d, 32, 2, 130, &xd);
    for (int64_t i = 0; i < sf->values().size(); ++i) {
      sf->values()[i] = static_cast<float>(sd->values()[i]);
    }
    for (int64_t i = 0; i < xf.size(); ++i) xf[i] = static_cast<float>(xd[i]);
    f.Forward(xf, &yf, Mode::kTrain);
    d.Forward(xd, &yd, Mode::kTrain);
    Tensor gf(yf.shape());
    TensorD gd(yd.shape());
    for (int64_t i = 0; i < gf.size(); ++i) {
      gd[i] = std::sin(0.37 * i);
      gf[i] = static_cast<float>(gd[i]);
    }
    f.Backward(gf, &dxf);
    d.Backward(gd, &dxd);
    auto worst = [](const auto& a, const auto& b, int64_t n) {
      double diff = 0, scale = 0;
      for (int64_t i = 0; i < n; ++i) {
        diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
        scale = std::max(scale, std::abs(static_cast<double>(b[i])));
      }
      return diff / scale;
    };
    EXPECT_LT(worst(yf, yd, yd.size()), 1e-5) << causal;
    EXPECT_LT(worst(dxf, dxd, dxd.size()), 1e-4) << causal;
    EXPECT_LT(worst(sf->grads(), sd->grads(), sd->grads().size()), 1e-4)
        << causal;
  }
}

// Runs `layer` (built by BuildRandom on x) forward and backward on
// `threads` compute threads; returns its output, input gradient and
// parameter gradients, end to end.
std::vector<float> PassesOnThreads(int threads, Layer<float>& layer,
                                   const ParamStore<float>& store,
                                   const Tensor& x) {
  SetOnednnThreads(threads);
  Tensor y, dx;
  layer.Forward(x, &y, Mode::kTrain);
  Tensor g(y.shape());
  for (int64_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.37f * i);
  layer.Backward(g, &dx);
  std::vector<float> all(y.data(), y.data() + y.size());
  all.insert(all.end(), dx.data(), dx.data() + dx.size());
  const Tensor& grads = store.grads();
  all.insert(all.end(), grads.data(), grads.data() + grads.size());
  SetOnednnThreads(0);
  return all;
}

// Attention's (sample, head) pairs go to the compute threads; every bit
// stays the same, with and without dropout.
std::vector<float> AttentionOnThreads(int threads, double dropout) {
  Attention<float> attn({4, true, dropout});
  Tensor x;
  auto store = BuildRandom<float>(attn, 32, 8, 70, &x);
  attn.SeedRandom(5);
  return PassesOnThreads(threads, attn, *store, x);
}

TEST(Attention, SameBitsOnOneAndTwoThreads) {
  for (double dropout : {0.0, 0.25}) {
    EXPECT_EQ(AttentionOnThreads(1, dropout), AttentionOnThreads(2, dropout))
        << "dropout " << dropout;
  }
}

// A transformer's LayerNorm (per position) splits its backward pass over
// positions and its weight gradients over channels; every bit stays the
// same.
std::vector<float> PositionNormOnThreads(int threads) {
  LayerNorm<float> norm(NormOptions{1e-5, true, 1, /*per_position=*/true});
  Tensor x;
  auto store = BuildRandom<float>(norm, 64, 8, 256, &x);
  return PassesOnThreads(threads, norm, *store, x);
}

TEST(LayerNorm, PerPositionSameBitsOnOneAndTwoThreads) {
  EXPECT_EQ(PositionNormOnThreads(1), PositionNormOnThreads(2));
}

}  // namespace
}  // namespace cohort

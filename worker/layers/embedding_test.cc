#include "worker/layers/embedding.h"

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/onednn_threads.h"
#include "worker/layers/grad_check.h"
#include "worker/layers/linear.h"
#include "worker/layers/param_store.h"
#include "worker/layers/tied_lm_head.h"
#include "worker/model.h"

namespace cohort {
namespace {

// Token ids {1, N, L} as the TOKENS data set gives them.
TensorD Ids(int64_t n, int64_t length, int64_t vocab, Rng& rng) {
  TensorD x({1, n, length});
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(id(rng));
  return x;
}

TensorD Random(const Shape& shape, Rng& rng) {
  TensorD t(shape);
  std::normal_distribution<double> normal;
  for (int64_t i = 0; i < t.size(); ++i) t[i] = normal(rng);
  return t;
}

double Loss(Model<double>& m, const TensorD& x, const TensorD& r) {
  const TensorD& y = m.Forward(x, Mode::kTrain);
  double s = 0;
  for (int64_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
  return s;
}

// loss = sum(model(x) * R): every parameter gradient against central
// differences, in double.
void ExpectModelGradients(Model<double>& m, const TensorD& x, Rng& rng) {
  const TensorD r = Random(m.Forward(x, Mode::kTrain).shape(), rng);
  m.Backward(r);
  const TensorD g = m.grads().Clone();
  double* v = m.params().data();
  for (const auto& e : m.param_store().entries()) {
    for (int64_t i = e.offset; i < e.offset + NumElements(e.shape); ++i) {
      const double saved = v[i], h = 1e-6;
      v[i] = saved + h;
      const double lp = Loss(m, x, r);
      v[i] = saved - h;
      const double lm = Loss(m, x, r);
      v[i] = saved;
      const double numeric = (lp - lm) / (2 * h);
      ASSERT_NEAR(g[i], numeric, 1e-7 + 1e-5 * std::abs(numeric))
          << e.name << " element " << i - e.offset;
    }
  }
}

template <typename T>
std::unique_ptr<Model<T>> MakeModel(typename Model<T>::LayerList layers,
                                    const Shape& in, uint64_t seed) {
  auto m = Model<T>::Create(std::move(layers), in);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return nullptr;
  (*m)->InitializeParameters(seed);
  return *std::move(m);
}

template <typename T>
typename Model<T>::LayerList GptLikeLayers(int64_t vocab, int64_t dim) {
  typename Model<T>::LayerList l;
  l.push_back(std::make_unique<Embedding<T>>(vocab, dim));
  l.push_back(std::make_unique<PositionalEmbedding<T>>());
  l.push_back(std::make_unique<TiedLmHead<T>>());
  return l;
}

TEST(Embedding, ForwardGathersRowsChannelMajor) {
  Embedding<float> layer(4, 3);
  ASSERT_EQ(*layer.Configure({1, 2}), (Shape{3, 2}));
  ParamStore<float> store;
  Layer<float>* layers[] = {&layer};
  store.Build(layers);
  for (int i = 0; i < 12; ++i) store.values()[i] = static_cast<float>(i);
  Tensor ids({1, 2, 2});  // sample 0: 3, 0; sample 1: 1, 3
  ids[0] = 3, ids[1] = 0, ids[2] = 1, ids[3] = 3;
  Tensor out;
  layer.Forward(ids, &out, Mode::kEval);
  ASSERT_EQ(out.shape(), (Shape{3, 2, 2}));
  // out(d, n, t) = weight[id(n, t), d] = 3 * id + d
  const float want[] = {9, 0, 3, 9, 10, 1, 4, 10, 11, 2, 5, 11};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out[i], want[i]) << i;
}

TEST(Embedding, RefusesAnythingButTokenIds) {
  Embedding<float> layer(10, 4);
  EXPECT_FALSE(layer.Configure({4, 8}).ok());
  EXPECT_FALSE(layer.Configure({8}).ok());
  EXPECT_TRUE(layer.Configure({1, 8}).ok());
  Embedding<float> empty(0, 4);
  EXPECT_FALSE(empty.Configure({1, 8}).ok());
}

TEST(Embedding, DeclaresAnUndecayedNormalWeight) {
  Embedding<float> layer(10, 4);
  ASSERT_TRUE(layer.Configure({1, 8}).ok());
  const std::vector<ParamDecl> p = layer.Params();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].name, "weight");
  EXPECT_EQ(p[0].shape, (Shape{10, 4}));
  EXPECT_EQ(p[0].init, ParamDecl::Init::kNormal);
  EXPECT_DOUBLE_EQ(p[0].std, 0.02);
}

// Sizes that are not multiples of the 32-wide tiles, repeated ids.
TEST(Embedding, WeightGradientMatchesFiniteDifferences) {
  Rng rng(3);
  typename Model<double>::LayerList l;
  l.push_back(std::make_unique<Embedding<double>>(11, 37));
  auto m = MakeModel<double>(std::move(l), {1, 7}, 1);
  ASSERT_NE(m, nullptr);
  ExpectModelGradients(*m, Ids(6, 7, 11, rng), rng);
}

TEST(Embedding, InputGradientIsZeroAndWeightGradientOverwrites) {
  Rng rng(4);
  Embedding<double> layer(5, 3);
  ASSERT_TRUE(layer.Configure({1, 4}).ok());
  ParamStore<double> store;
  Layer<double>* layers[] = {&layer};
  store.Build(layers);
  store.Initialize(rng);
  const TensorD x = Ids(2, 4, 5, rng);
  TensorD y, dx;
  layer.Forward(x, &y, Mode::kTrain);
  const TensorD r = Random(y.shape(), rng);
  layer.Backward(r, &dx);
  const TensorD first = store.grads().Clone();
  layer.Backward(r, &dx);  // again: the same, not twice as much
  for (int64_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(store.grads()[i], first[i]);
  }
  ASSERT_EQ(dx.shape(), x.shape());
  for (int64_t i = 0; i < dx.size(); ++i) EXPECT_EQ(dx[i], 0.0);
}

TEST(PositionalEmbedding, GradientsMatchFiniteDifferences) {
  PositionalEmbedding<double> layer;
  const absl::Status s = CheckLayerGradients(layer, {37, 5}, {37, 3, 5});
  EXPECT_TRUE(s.ok()) << s;
  ASSERT_EQ(layer.Params().size(), 1u);
  EXPECT_EQ(layer.Params()[0].shape, (Shape{5, 37}));
}

TEST(PositionalEmbedding, AddsTheRowOfEachPosition) {
  PositionalEmbedding<float> layer;
  ASSERT_TRUE(layer.Configure({2, 3}).ok());
  ParamStore<float> store;
  Layer<float>* layers[] = {&layer};
  store.Build(layers);
  // weight {L = 3, D = 2}: row t = {10 t, 10 t + 1}
  for (int t = 0; t < 3; ++t) {
    store.values()[2 * t] = 10.0f * t;
    store.values()[2 * t + 1] = 10.0f * t + 1;
  }
  Tensor x({2, 2, 3});  // zeros: the output is the table itself
  x.SetZero();
  Tensor out;
  layer.Forward(x, &out, Mode::kEval);
  const float want[] = {0, 10, 20, 0, 10, 20, 1, 11, 21, 1, 11, 21};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out[i], want[i]) << i;
}

TEST(PositionalEmbedding, SameBitsOnOneAndTwoThreads) {
  // Features go to the compute threads; each sums its samples in order.
  std::vector<float> runs[2];
  for (int threads : {1, 2}) {
    SetOnednnThreads(threads);
    PositionalEmbedding<float> layer;
    ASSERT_TRUE(layer.Configure({64, 96}).ok());
    ParamStore<float> store;
    Layer<float>* layers[] = {&layer};
    store.Build(layers);
    Tensor& w = store.values();
    for (int64_t i = 0; i < w.size(); ++i) {
      w[i] = static_cast<float>((i * 7919) % 1013) * 0.01f;
    }
    Tensor x({64, 12, 96}), y, dx;
    for (int64_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<float>((i * 104729) % 997) * 0.002f - 1.0f;
    }
    layer.Forward(x, &y, Mode::kTrain);
    layer.Backward(x, &dx);
    std::vector<float>& r = runs[threads - 1];
    r.assign(y.data(), y.data() + y.size());
    r.insert(r.end(), dx.data(), dx.data() + dx.size());
    const Tensor& g = store.grads();
    r.insert(r.end(), g.data(), g.data() + g.size());
  }
  SetOnednnThreads(0);
  EXPECT_EQ(runs[0], runs[1]);
}

// embedding -> positional -> tied head: the shared weight's gradient is the
// sum of the head's use and the embedding's.
TEST(TiedLmHead, SharedWeightGradientMatchesFiniteDifferences) {
  Rng rng(5);
  auto m = MakeModel<double>(GptLikeLayers<double>(13, 35), {1, 6}, 2);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->output_shape(), (Shape{13, 6}));
  // Only the embedding and the positional table hold parameters.
  ASSERT_EQ(m->param_store().entries().size(), 2u);
  EXPECT_EQ(m->param_store().entries()[0].name, "0.weight");
  ExpectModelGradients(*m, Ids(5, 6, 13, rng), rng);
}

TEST(TiedLmHead, LogitsAreTheEmbeddingTimesTheInput) {
  // embedding(3, 2) -> tied head: logits(v, t) = E[v] . E[id(t)].
  typename Model<float>::LayerList l;
  l.push_back(std::make_unique<Embedding<float>>(3, 2));
  l.push_back(std::make_unique<TiedLmHead<float>>());
  auto m = MakeModel<float>(std::move(l), {1, 2}, 1);
  ASSERT_NE(m, nullptr);
  const float e[] = {1, 2, 0, -1, 3, 1};  // rows {1, 2}, {0, -1}, {3, 1}
  for (int i = 0; i < 6; ++i) m->params()[i] = e[i];
  Tensor ids({1, 1, 2});
  ids[0] = 2, ids[1] = 1;
  const Tensor& y = m->Forward(ids, Mode::kTrain);
  ASSERT_EQ(y.shape(), (Shape{3, 1, 2}));
  const float want[] = {5, -2, -1, 1, 10, -1};  // {v, t}
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], want[i]) << i;
  // dLoss/dlogits = 1 everywhere: dE = (sum_t x_t) for every row from the
  // head, plus, for each id, sum_v E[v] (the head's dx) from the embedding.
  Tensor r({3, 1, 2});
  r.Fill(1.0f);
  m->Backward(r);
  // sum_t x_t = E[2] + E[1] = {3, 0}; sum_v E[v] = {4, 2}.
  const float grad[] = {3, 0, 3 + 4, 0 + 2, 3 + 4, 0 + 2};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(m->grads()[i], grad[i]) << i;
}

TEST(TiedLmHead, NeedsAnEmbeddingBeforeIt) {
  typename Model<float>::LayerList l;
  l.push_back(std::make_unique<PositionalEmbedding<float>>());
  l.push_back(std::make_unique<TiedLmHead<float>>());
  l.push_back(std::make_unique<Embedding<float>>(3, 4));
  auto m = Model<float>::Create(std::move(l), {4, 5});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find(
                "tied_lm_head needs an embedding layer before it"),
            std::string::npos)
      << m.status();
  // An embedding anywhere but first would read computed values as ids.
  typename Model<float>::LayerList late;
  late.push_back(std::make_unique<Linear<float>>(8));
  late.push_back(std::make_unique<Embedding<float>>(3, 4));
  auto refused = Model<float>::Create(std::move(late), {8});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("must be the model's first layer"),
            std::string::npos)
      << refused.status();
  TiedLmHead<float> alone;
  EXPECT_FALSE(alone.Configure({4, 5}).ok());
}

// Each gradient range reported ready is final: the tied weight (layer 0's
// range) only after the embedding's Backward.
TEST(TiedLmHead, ReadyRangesAreFinal) {
  Rng rng(6);
  typename Model<double>::LayerList l = GptLikeLayers<double>(9, 16);
  auto m = MakeModel<double>(std::move(l), {1, 4}, 3);
  ASSERT_NE(m, nullptr);
  const TensorD x = Ids(3, 4, 9, rng);
  const TensorD r = Random(m->Forward(x, Mode::kTrain).shape(), rng);
  std::vector<std::pair<int64_t, std::vector<double>>> seen;
  m->Backward(r, [&](int64_t offset) {
    const double* g = m->grads().data();
    seen.emplace_back(offset,
                      std::vector<double>(g + offset, g + m->grads().size()));
  });
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().first, 0);
  for (const auto& [offset, snapshot] : seen) {
    for (size_t i = 0; i < snapshot.size(); ++i) {
      ASSERT_EQ(snapshot[i], m->grads()[offset + i])
          << "ready(" << offset << ") before element " << offset + i
          << " was final";
    }
  }
}

// A replica reads the owner's values through its head too, and writes only
// its own gradients.
TEST(TiedLmHead, ReplicasTieTheSameWay) {
  Rng rng(7);
  auto owner = MakeModel<double>(GptLikeLayers<double>(7, 8), {1, 3}, 4);
  ASSERT_NE(owner, nullptr);
  auto replica =
      Model<double>::CreateReplica(GptLikeLayers<double>(7, 8), *owner);
  ASSERT_TRUE(replica.ok()) << replica.status();
  EXPECT_EQ((*replica)->params().data(), owner->params().data());
  EXPECT_NE((*replica)->grads().data(), owner->grads().data());

  const TensorD x = Ids(2, 3, 7, rng);
  const TensorD r = Random({7, 2, 3}, rng);
  owner->grads().SetZero();
  ExpectModelGradients(**replica, x, rng);
  for (int64_t i = 0; i < owner->grads().size(); ++i) {
    ASSERT_EQ(owner->grads()[i], 0.0) << "the replica wrote the owner's grads";
  }
  // Same input, same values: the owner computes the same gradients.
  (*replica)->Forward(x, Mode::kTrain);
  (*replica)->Backward(r);
  owner->Forward(x, Mode::kTrain);
  owner->Backward(r);
  for (int64_t i = 0; i < owner->grads().size(); ++i) {
    EXPECT_EQ(owner->grads()[i], (*replica)->grads()[i]) << i;
  }
  // A change to the shared embedding shows in the replica's logits.
  const double before = (*replica)->Forward(x, Mode::kEval)[0];
  owner->params()[0] += 1.0;
  EXPECT_NE((*replica)->Forward(x, Mode::kEval)[0], before);
}

// The float engine agrees with the double one through the tiled paths.
TEST(TiedLmHead, FloatMatchesDouble) {
  Rng rng(8);
  auto md = MakeModel<double>(GptLikeLayers<double>(50, 40), {1, 33}, 5);
  auto mf = MakeModel<float>(GptLikeLayers<float>(50, 40), {1, 33}, 5);
  ASSERT_TRUE(md != nullptr && mf != nullptr);
  for (int64_t i = 0; i < md->params().size(); ++i) {
    mf->params()[i] = static_cast<float>(md->params()[i]);
  }
  const TensorD xd = Ids(3, 33, 50, rng);
  Tensor xf(xd.shape());
  for (int64_t i = 0; i < xd.size(); ++i) xf[i] = static_cast<float>(xd[i]);
  const TensorD& yd = md->Forward(xd, Mode::kTrain);
  const Tensor& yf = mf->Forward(xf, Mode::kTrain);
  for (int64_t i = 0; i < yd.size(); ++i) ASSERT_NEAR(yf[i], yd[i], 1e-5) << i;
  const TensorD rd = Random(yd.shape(), rng);
  Tensor rf(rd.shape());
  for (int64_t i = 0; i < rd.size(); ++i) rf[i] = static_cast<float>(rd[i]);
  md->Backward(rd);
  mf->Backward(rf);
  for (int64_t i = 0; i < md->grads().size(); ++i) {
    ASSERT_NEAR(mf->grads()[i], md->grads()[i],
                1e-4 * (1 + std::abs(md->grads()[i])))
        << i;
  }
}

}  // namespace
}  // namespace cohort

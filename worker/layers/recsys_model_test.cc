// A small DLRM built from its spec as the zoo builds any model: dense
// features through a bottom MLP, ids through embedding_bag, both in a
// CONCAT branch split by slices, then the dot interaction and a top layer.
// Every parameter gradient against finite differences in double, the
// tables' saved names, and the same output in float and double.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "worker/model.h"
#include "worker/zoo.h"

namespace cohort {
namespace {

// 3 dense features, then 3 ids as (hi, lo) pairs: 9 floats per sample.
constexpr char kDlrm[] = R"pb(
  layers {
    branch {
      combine: CONCAT
      paths {
        layers { slice { begin: 0 end: 3 } }
        layers { linear { out_features: 5 } }
        layers { tanh {} }
        layers { linear { out_features: 4 } }
      }
      paths {
        layers { slice { begin: 3 end: 9 } }
        layers {
          embedding_bag {
            rows: [ 5, 7, 300 ]
            dim: 4
          } NAME
        }
      }
    }
  }
  layers { interaction { kind: DOT dim: 4 } }
  layers { linear { out_features: 2 } }
)pb";

ModelSpec Spec(const std::string& name) {
  std::string text = kDlrm;
  text.replace(text.find("NAME"), 4, name);
  ModelSpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec));
  return spec;
}

template <typename T>
BasicTensor<T> Batch(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::normal_distribution<double> normal;
  const int64_t rows[] = {5, 7, 300};
  BasicTensor<T> x({n, 9});
  for (int64_t s = 0; s < n; ++s) {
    for (int d = 0; d < 3; ++d) x[s * 9 + d] = static_cast<T>(normal(rng));
    for (int t = 0; t < 3; ++t) {
      x[s * 9 + 3 + 2 * t] = 0;
      x[s * 9 + 4 + 2 * t] = static_cast<T>(rng() % rows[t]);
    }
  }
  return x;
}

double Loss(Model<double>& m, const TensorD& x, const TensorD& r) {
  const TensorD& y = m.Forward(x, Mode::kTrain);
  double s = 0;
  for (int64_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
  return s;
}

TEST(RecsysModel, GradientsMatchFiniteDifferences) {
  auto m = BuildModel<double>(Spec(""), {9}, 17);
  ASSERT_TRUE(m.ok()) << m.status();
  Model<double>& model = **m;
  const TensorD x = Batch<double>(6, 3);
  TensorD r({6, 2});
  Rng rng(4);
  std::normal_distribution<double> normal;
  for (int64_t i = 0; i < r.size(); ++i) r[i] = normal(rng);
  model.Forward(x, Mode::kTrain);
  model.Backward(r);
  const TensorD g = model.grads().Clone();
  double* v = model.params().data();
  for (const auto& e : model.param_store().entries()) {
    for (int64_t i = e.offset; i < e.offset + NumElements(e.shape); ++i) {
      const double saved = v[i], h = 1e-6;
      v[i] = saved + h;
      const double lp = Loss(model, x, r);
      v[i] = saved - h;
      const double lm = Loss(model, x, r);
      v[i] = saved;
      const double numeric = (lp - lm) / (2 * h);
      ASSERT_NEAR(g[i], numeric, 1e-7 + 1e-5 * std::abs(numeric))
          << e.name << " element " << i - e.offset;
    }
  }
}

// The tables are saved as nn.ModuleList([nn.EmbeddingBag, ...]) under the
// layer's name, or under its position.
TEST(RecsysModel, TablesAreNamedAsAModuleList) {
  auto named = BuildModel<float>(Spec("name: \"emb\""), {9}, 1);
  auto unnamed = BuildModel<float>(Spec(""), {9}, 1);
  ASSERT_TRUE(named.ok()) << named.status();
  ASSERT_TRUE(unnamed.ok()) << unnamed.status();
  std::vector<std::string> got, position;
  for (const auto& e : (*named)->param_store().entries()) {
    got.push_back((*named)->TensorName(e.name));
    position.push_back((*unnamed)->TensorName(e.name));
  }
  ASSERT_EQ(got.size(), 4u + 3u + 2u);
  EXPECT_EQ(got[4], "emb.0.weight");
  EXPECT_EQ(got[5], "emb.1.weight");
  EXPECT_EQ(got[6], "emb.2.weight");
  EXPECT_EQ(position[4], "0.paths.1.1.0.weight");
  EXPECT_EQ(position[6], "0.paths.1.1.2.weight");
  EXPECT_EQ((*named)->param_store().entries()[6].shape, (Shape{300, 4}));
}

TEST(RecsysModel, FloatAndDoubleAgree) {
  auto f = BuildModel<float>(Spec(""), {9}, 5);
  auto d = BuildModel<double>(Spec(""), {9}, 5);
  ASSERT_TRUE(f.ok() && d.ok());
  for (int64_t i = 0; i < (*f)->params().size(); ++i) {
    (*d)->params()[i] = (*f)->params()[i];
  }
  const Tensor& yf = (*f)->Forward(Batch<float>(8, 9), Mode::kEval);
  const TensorD& yd = (*d)->Forward(Batch<double>(8, 9), Mode::kEval);
  ASSERT_EQ(yf.shape(), (Shape{8, 2}));
  for (int64_t i = 0; i < yf.size(); ++i) EXPECT_NEAR(yf[i], yd[i], 1e-5) << i;
}

}  // namespace
}  // namespace cohort

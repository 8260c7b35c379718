#include "cli/generate.h"

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "worker/layers/embedding.h"
#include "worker/layers/tied_lm_head.h"
#include "worker/model.h"

namespace cohort {
namespace {

constexpr int64_t kVocab = 7, kDim = 4, kLength = 5;

// A causal mixer standing in for attention: out(d, n, t) = sum over s <= t
// of in(d, n, s). Position t sees the window up to t and nothing after, so
// the end padding must not change the logits read at the last real one.
class CausalSum : public Layer<float> {
 public:
  std::string Name() const override { return "causal_sum"; }
  absl::StatusOr<Shape> Configure(const Shape& in) override { return in; }
  void Forward(const Tensor& in, Tensor* out, Mode) override {
    out->Resize(in.shape());
    const int64_t rows = in.dim(0) * in.dim(1), l = in.dim(2);
    for (int64_t r = 0; r < rows; ++r) {
      float acc = 0;
      for (int64_t t = 0; t < l; ++t) {
        acc += in[r * l + t];
        (*out)[r * l + t] = acc;
      }
    }
  }
  void Backward(const Tensor&, Tensor*) override {}
};

// embedding(7, 4) -> positional {5, 4} -> causal sum -> tied head, with
// weights of unit scale (so that no two logits nearly tie).
std::unique_ptr<Model<float>> TinyLm() {
  Model<float>::LayerList l;
  l.push_back(std::make_unique<Embedding<float>>(kVocab, kDim));
  l.push_back(std::make_unique<PositionalEmbedding<float>>());
  l.push_back(std::make_unique<CausalSum>());
  l.push_back(std::make_unique<TiedLmHead<float>>());
  auto m = Model<float>::Create(std::move(l), {1, kLength});
  EXPECT_TRUE(m.ok()) << m.status();
  Rng rng(11);
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < (*m)->params().size(); ++i) {
    (*m)->params()[i] = normal(rng);
  }
  return *std::move(m);
}

// The next token's logits, computed by hand from the weights: the window is
// the last min(len, L) tokens at positions 0.., x = sum over it of
// E[id] + P[t], logit(v) = E[v] . x.
std::vector<double> HandLogits(Model<float>& m,
                               const std::vector<int32_t>& text) {
  const auto& entries = m.param_store().entries();
  const float* e = m.params().data() + entries[0].offset;
  const float* p = m.params().data() + entries[1].offset;
  const int64_t w = std::min<int64_t>(kLength, text.size());
  std::vector<double> x(kDim, 0.0);
  for (int64_t t = 0; t < w; ++t) {
    const int32_t id = text[text.size() - w + t];
    for (int64_t d = 0; d < kDim; ++d) {
      x[d] += e[id * kDim + d] + p[t * kDim + d];
    }
  }
  std::vector<double> logits(kVocab, 0.0);
  for (int64_t v = 0; v < kVocab; ++v) {
    for (int64_t d = 0; d < kDim; ++d) logits[v] += e[v * kDim + d] * x[d];
  }
  return logits;
}

int32_t ArgMax(const std::vector<double>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

std::vector<int32_t> Continue(Model<float>& m, std::vector<int32_t> prompt,
                              const GenerateOptions& o) {
  const absl::Status s = Generate(m, prompt, o);
  EXPECT_TRUE(s.ok()) << s;
  return prompt;
}

GenerateOptions Options(int64_t n, double temperature, int64_t top_k,
                        uint64_t seed) {
  GenerateOptions o;
  o.tokens = n;
  o.temperature = temperature;
  o.top_k = top_k;
  o.seed = seed;
  return o;
}

TEST(Generate, GreedyIsTheArgmaxOfTheLogitsStepByStep) {
  auto m = TinyLm();
  // Short (padded) and long (sliding) windows both occur: 2 tokens grow to
  // 22, past L = 5.
  const std::vector<int32_t> text = Continue(*m, {3, 1}, Options(20, 0, 0, 1));
  ASSERT_EQ(text.size(), 22u);
  std::vector<int32_t> so_far = {3, 1};
  for (size_t i = 2; i < text.size(); ++i) {
    EXPECT_EQ(text[i], ArgMax(HandLogits(*m, so_far))) << "step " << i - 2;
    so_far.push_back(text[i]);
  }
  EXPECT_EQ(Continue(*m, {3, 1}, Options(20, 0, 0, 99)), text)
      << "greedy decoding depends on the seed";
}

TEST(Generate, TopKOneIsGreedy) {
  auto m = TinyLm();
  const std::vector<int32_t> greedy = Continue(*m, {6}, Options(15, 0, 0, 1));
  EXPECT_EQ(Continue(*m, {6}, Options(15, 1.0, 1, 1)), greedy);
  EXPECT_EQ(Continue(*m, {6}, Options(15, 3.0, 1, 7)), greedy);
}

TEST(Generate, SeedsReproduce) {
  auto m = TinyLm();
  const std::vector<int32_t> a =
      Continue(*m, {0, 2, 4}, Options(40, 5.0, 0, 5));
  EXPECT_EQ(Continue(*m, {0, 2, 4}, Options(40, 5.0, 0, 5)), a);
  EXPECT_NE(Continue(*m, {0, 2, 4}, Options(40, 5.0, 0, 6)), a);
}

TEST(Generate, TopKSamplesOnlyTheKMostLikely) {
  auto m = TinyLm();
  const std::vector<int32_t> text = Continue(*m, {1}, Options(60, 10.0, 3, 2));
  std::vector<int32_t> so_far = {1};
  for (size_t i = 1; i < text.size(); ++i) {
    std::vector<double> l = HandLogits(*m, so_far);
    std::vector<double> sorted = l;
    std::sort(sorted.rbegin(), sorted.rend());
    EXPECT_GE(l[text[i]], sorted[2]) << "step " << i - 1;
    so_far.push_back(text[i]);
  }
}

// softmax(logits / T): logits {0, ln 3} give 3/4 at T = 1 and
// sqrt(3) / (1 + sqrt(3)) at T = 2.
TEST(Generate, SamplesTheTemperedSoftmax) {
  const float logits[] = {0.0f, 0.0f, std::log(3.0f), 0.0f};  // stride 2
  for (const auto& [t, want] : {std::pair<double, double>{1.0, 0.75},
                                {2.0, std::sqrt(3.0) / (1 + std::sqrt(3.0))}}) {
    std::mt19937_64 rng(1);
    int ones = 0;
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
      ones += SampleToken(logits, 2, 2, Options(1, t, 0, 0), rng);
    }
    EXPECT_NEAR(static_cast<double>(ones) / n, want, 0.015) << "T = " << t;
  }
}

TEST(Generate, RefusesBadOptionsAndPrompts) {
  auto m = TinyLm();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const GenerateOptions& o :
       {Options(0, 1, 0, 0), Options(-3, 1, 0, 0), Options(5, -0.5, 0, 0),
        Options(5, nan, 0, 0), Options(5, 1, kVocab + 1, 0),
        Options(5, 1, -1, 0)}) {
    std::vector<int32_t> text = {1, 2};
    const absl::Status s = Generate(*m, text, o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(text.size(), 2u);
  }
  EXPECT_TRUE(CheckGenerateOptions(Options(1, 0, kVocab, 0), kVocab).ok());
  std::vector<int32_t> empty;
  EXPECT_NE(Generate(*m, empty, Options(3, 1, 0, 0)).message().find("empty"),
            absl::string_view::npos);
  std::vector<int32_t> outside = {1, kVocab};
  EXPECT_NE(Generate(*m, outside, Options(3, 1, 0, 0))
                .message()
                .find("outside the model's vocabulary"),
            absl::string_view::npos);
}

// The flag's value: an integer too large for 64 bits is "out of range"
// (not "must be an integer >= -9223372036854775808"), one line naming the
// flag and the range.
TEST(Generate, FlagOutOfRangeSaysSo) {
  EXPECT_EQ(*ParseGenerateFlag("200"), 200);
  EXPECT_EQ(*ParseGenerateFlag("2147483647"), 2147483647);
  for (const char* v : {"99999999999999999999", "-99999999999999999999",
                        "2147483648", "0", "-3"}) {
    const absl::StatusOr<int64_t> n = ParseGenerateFlag(v);
    ASSERT_FALSE(n.ok()) << v;
    EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(n.status().message(),
              std::string("--generate=") + v +
                  " is out of range: the tokens to generate must lie in [1, "
                  "2147483647]");
  }
  for (const char* v : {"", "12abc", "1e3", "-", "+5", " 5"}) {
    const absl::StatusOr<int64_t> n = ParseGenerateFlag(v);
    ASSERT_FALSE(n.ok()) << v;
    EXPECT_EQ(n.status().message(),
              std::string("--generate must be an integer in [1, 2147483647] "
                          "(tokens to generate), got \"") +
                  v + "\"");
  }
  EXPECT_EQ(ParseGenerateFlag("1\n2").status().message(),
            "--generate must be an integer in [1, 2147483647] (tokens to "
            "generate), got \"1\\n2\"");
}

TEST(Generate, RefusesAModelThatIsNoLanguageModel) {
  Model<float>::LayerList l;
  l.push_back(std::make_unique<PositionalEmbedding<float>>());
  auto m = Model<float>::Create(std::move(l), {4, 5});
  ASSERT_TRUE(m.ok());
  std::vector<int32_t> text = {1};
  const absl::Status s = Generate(**m, text, Options(3, 1, 0, 0));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace cohort

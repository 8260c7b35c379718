#include "cli/generate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "proto/job.pb.h"

namespace cohort {

absl::StatusOr<int64_t> ParseGenerateFlag(const std::string& value) {
  const std::string range = absl::StrCat("[1, ", kMaxGenerateTokens, "]");
  const absl::string_view digits =
      absl::string_view(value).substr(!value.empty() && value[0] == '-');
  const bool integer = !digits.empty() &&
                       std::all_of(digits.begin(), digits.end(),
                                   [](char c) { return c >= '0' && c <= '9'; });
  int64_t v = 0;
  if (integer && absl::SimpleAtoi(value, &v) && v >= 1 &&
      v <= kMaxGenerateTokens) {
    return v;
  }
  if (integer) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--generate=", EscapeText(value, 40),
        " is out of range: the tokens to generate must lie in ", range));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--generate must be an integer in ", range,
      " (tokens to generate), got \"", EscapeText(value, 40), "\""));
}

absl::Status CheckGenerateOptions(const GenerateOptions& o, int64_t vocab) {
  if (o.tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--generate must be at least 1 (tokens to generate), got ", o.tokens));
  }
  if (!(o.temperature >= 0) || std::isinf(o.temperature)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--temperature must be a finite number >= 0 (0: "
                     "greedy), got ",
                     o.temperature));
  }
  if (o.top_k < 0 || o.top_k > vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("--top-k must lie in [0, ", vocab,
                     "] (the model's vocabulary; 0: all "
                     "tokens), got ",
                     o.top_k));
  }
  return absl::OkStatus();
}

int32_t SampleToken(const float* logits, int64_t vocab, int64_t stride,
                    const GenerateOptions& o, std::mt19937_64& rng) {
  auto logit = [&](int64_t v) { return logits[v * stride]; };
  // Largest logit first; the lower id first on ties, so greedy and top-k
  // are deterministic.
  auto before = [&](int32_t a, int32_t b) {
    return logit(a) > logit(b) || (logit(a) == logit(b) && a < b);
  };
  if (o.temperature == 0 || o.top_k == 1) {
    int32_t best = 0;
    for (int32_t v = 1; v < vocab; ++v) {
      if (before(v, best)) best = v;
    }
    return best;
  }
  std::vector<int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  const int64_t k = o.top_k > 0 ? o.top_k : vocab;
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), before);
  ids.resize(k);
  std::vector<double> p(k);
  const double top = logit(ids[0]);
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) {
    p[i] = std::exp((logit(ids[i]) - top) / o.temperature);
    sum += p[i];
  }
  const double u = std::uniform_real_distribution<double>(0.0, sum)(rng);
  double acc = 0;
  for (int64_t i = 0; i < k; ++i) {
    acc += p[i];
    if (u < acc) return ids[i];
  }
  return ids[k - 1];  // u rounded to the very top
}

namespace {

// Everything Generate refuses, checked before anything is printed.
absl::Status CheckGeneration(const Model<float>& model,
                             const std::vector<int32_t>& text,
                             const GenerateOptions& o) {
  const Shape& in = model.input_shape();
  const Shape& out = model.output_shape();
  if (in.size() != 2 || in[0] != 1 || out.size() != 2 || out[1] != in[1]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "text generation needs a language model taking token windows {1, L} "
        "and giving logits {vocab, L}; this one takes ",
        ShapeString(in), " and gives ", ShapeString(out)));
  }
  const int64_t vocab = out[0];
  RETURN_IF_ERROR(CheckGenerateOptions(o, vocab));
  if (text.empty()) {
    return absl::InvalidArgumentError(
        "--prompt is empty: give at least one token to start from");
  }
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] < 0 || text[i] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--prompt: token ", text[i], " at offset ", i,
          " lies outside the model's vocabulary of ", vocab, " tokens"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Generate(Model<float>& model, std::vector<int32_t>& text,
                      const GenerateOptions& o,
                      const std::function<void(int32_t)>& emit) {
  RETURN_IF_ERROR(CheckGeneration(model, text, o));
  const int64_t length = model.input_shape()[1];
  const int64_t vocab = model.output_shape()[0];
  std::mt19937_64 rng(o.seed);
  Tensor window({1, 1, length});
  for (int64_t step = 0; step < o.tokens; ++step) {
    const int64_t w = std::min<int64_t>(length, text.size());
    const int32_t* last = text.data() + text.size() - w;
    window.SetZero();  // the padding after the real positions
    for (int64_t t = 0; t < w; ++t) window[t] = static_cast<float>(last[t]);
    const Tensor& logits = model.Forward(window, Mode::kEval);
    const int32_t next =
        SampleToken(logits.data() + (w - 1), vocab, length, o, rng);
    text.push_back(next);
    if (emit) emit(next);
  }
  return absl::OkStatus();
}

absl::Status GenerateText(TrainedModel& trained, const std::string& prompt,
                          const GenerateOptions& o) {
  const DatasetSpec& data = trained.spec.data();
  if (data.kind() != DatasetSpec::TOKENS ||
      data.tokens().format() != TokensSpec::BYTES) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--prompt: text generation reads the prompt's bytes as token ids, so "
        "it needs a checkpoint of a TOKENS data set in format BYTES; this "
        "one's data set is ",
        DatasetSpec::Kind_Name(data.kind()),
        data.kind() == DatasetSpec::TOKENS
            ? absl::StrCat(" in format ",
                           TokensSpec::Format_Name(data.tokens().format()))
            : ""));
  }
  std::vector<int32_t> text;
  for (unsigned char c : prompt) text.push_back(c);
  // Checked before the prompt is printed, so a refusal prints nothing.
  RETURN_IF_ERROR(CheckGeneration(*trained.model, text, o));
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
  return Generate(*trained.model, text, o, [](int32_t token) {
    std::putchar(token);
    std::fflush(stdout);
  });
}

}  // namespace cohort

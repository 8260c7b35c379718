#include "worker/objective.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "worker/loss.h"
#include "worker/metrics/normalized_entropy.h"
#include "worker/metrics/roc_auc.h"

namespace cohort {
namespace {

ElementLoss ElementKind(LossKind kind) {
  switch (kind) {
    case L1:
      return ElementLoss::kL1;
    case HUBER:
      return ElementLoss::kHuber;
    case BCE_WITH_LOGITS:
      return ElementLoss::kBce;
    default:
      return ElementLoss::kMse;
  }
}

// Rows of `out` {N, K} whose first maximum is the label.
int64_t CountTop1(const Tensor& out, const std::vector<int32_t>& labels) {
  return CountTopK<float>(out, labels, 1);
}

// The mean of sample `index`'s target elements (0 for class data).
double TargetMean(const Dataset& data, int64_t index) {
  if (!data.float_targets() || data.token_targets() || data.size() <= index) {
    return 0;
  }
  std::vector<float> x(NumElements(data.sample_shape()));
  std::vector<float> t(NumElements(data.target_shape()));
  SampleOut out;
  out.features = x.data();
  out.target = t.data();
  if (!data.Read(index, 0, out).ok() || t.empty()) return 0;
  double sum = 0;
  for (float v : t) sum += v;
  return sum / static_cast<double>(t.size());
}

}  // namespace

Objective::Objective(const JobSpec& spec, const Dataset& test)
    : kind_(spec.loss()),
      label_smoothing_(spec.label_smoothing()),
      loss_weights_(spec.loss_weights().begin(), spec.loss_weights().end()),
      ignore_index_(spec.has_ignore_index() ? spec.ignore_index() : -1),
      huber_delta_(spec.huber_delta() > 0 ? spec.huber_delta() : 1.0f),
      float_targets_(test.float_targets()),
      token_targets_(test.token_targets()),
      target_shape_(test.target_shape()),
      target_elements_(float_targets_ ? NumElements(target_shape_) : 0),
      classes_(test.num_classes()),
      reference_(TargetMean(test, 0)),
      binary_(kind_ == BCE_WITH_LOGITS && float_targets_ && !token_targets_ &&
              target_elements_ == 1) {}

absl::Status Objective::CheckModelOutput(const Shape& out) const {
  RETURN_IF_ERROR(CheckOutputShape(out));
  // PyTorch's rule: one weight per logit.
  const int64_t logits = token_targets_ ? classes_ : out[0];
  if (!loss_weights_.empty() &&
      static_cast<int64_t>(loss_weights_.size()) != logits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loss_weights has ", loss_weights_.size(),
        " weights but the model gives ", logits, " logits per ",
        token_targets_ ? "position" : "sample", ": give one per logit"));
  }
  return absl::OkStatus();
}

absl::Status Objective::CheckOutputShape(const Shape& out) const {
  if (token_targets_) {
    // Logits per position: {vocabulary, positions}.
    const Shape want = {classes_, target_shape_[0]};
    if (out != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the model's output per sample is ", ShapeString(out),
          " but next-token prediction over a vocabulary of ", classes_, " at ",
          target_shape_[0], " positions needs ", ShapeString(want),
          " (end with tied_lm_head, or conv1d { out_channels: ", classes_,
          " kernel: 1 })"));
    }
    return absl::OkStatus();
  }
  if (float_targets_) {
    // Outputs are compared with targets element by element, and both are
    // laid out by their shape (loader.h): the shapes must agree.
    if (out != target_shape_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the model's output per sample is ", ShapeString(out),
          " but the data's float targets are ", ShapeString(target_shape_),
          ": the model's last layer must give that shape (a linear layer "
          "with ",
          target_elements_, " outputs for a flat target)"));
    }
    return absl::OkStatus();
  }
  if (out.size() != 1 || out[0] < classes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model's output per sample is ", ShapeString(out), " but ",
        LossKind_Name(kind_), " over a data set of ", classes_,
        " classes needs [", classes_, "] (add a final linear layer)"));
  }
  return absl::OkStatus();
}

const Tensor& Objective::Targets(const Tensor& out, const Batch& batch,
                                 Tensor* scratch) const {
  if (float_targets_) return batch.targets;
  // One-hot vectors of the labels, which an explicit elementwise loss on
  // class data compares with.
  scratch->Resize(out.shape());
  scratch->SetZero();
  const int64_t n = static_cast<int64_t>(batch.labels.size());
  const int64_t k = n > 0 ? out.size() / n : 0;
  for (int64_t i = 0; i < n; ++i) {
    if (batch.labels[i] < k) (*scratch)[i * k + batch.labels[i]] = 1;
  }
  return *scratch;
}

double Objective::Loss(const Tensor& out, const Batch& batch, Tensor* grad,
                       Tensor* scratch, int64_t* correct) const {
  if (token_targets_) {
    // Training accuracy counts samples; per-token accuracy is an
    // evaluation metric only.
    return SequenceCrossEntropy<float>(
        out, absl::MakeConstSpan(batch.targets.data(), batch.targets.size()),
        grad, nullptr, label_smoothing_, Weighting());
  }
  if (kind_ == CROSS_ENTROPY) {
    return SoftmaxCrossEntropy<float>(out, batch.labels, grad, correct,
                                      label_smoothing_, Weighting());
  }
  if (!float_targets_ && correct != nullptr) {
    *correct += CountTop1(out, batch.labels);
  }
  return ElementwiseLoss<float>(ElementKind(kind_), huber_delta_, out,
                                Targets(out, batch, scratch), grad);
}

void Objective::Accumulate(const Tensor& out, const Batch& batch,
                           Tensor* scratch, EvalSums* sums) const {
  double* v = sums->v;
  const int64_t n = batch.size();
  v[EvalSums::kSamples] += n;
  if (token_targets_) {
    int64_t hits = 0;
    v[EvalSums::kLoss] +=
        SequenceCrossEntropy<float>(
            out,
            absl::MakeConstSpan(batch.targets.data(), batch.targets.size()),
            nullptr, &hits, label_smoothing_, Weighting()) *
        n;
    v[EvalSums::kTop1] += static_cast<double>(hits);
    v[EvalSums::kElements] += static_cast<double>(batch.targets.size());
    return;
  }
  v[EvalSums::kLoss] += Loss(out, batch, nullptr, scratch, nullptr) * n;
  if (!float_targets_) {
    v[EvalSums::kTop1] += CountTop1(out, batch.labels);
    v[EvalSums::kTop5] += CountTopK<float>(out, batch.labels, 5);
    return;
  }
  AccumulateFloats(out, batch.targets, sums);
}

void Objective::AccumulateFloats(const Tensor& out, const Tensor& t,
                                 EvalSums* sums) const {
  double* v = sums->v;
  CHECK_EQ(out.size(), t.size())
      << "Objective: output " << ShapeString(out.shape()) << " vs targets "
      << ShapeString(t.shape());
  double hits = 0, abs_error = 0, sq_error = 0, shifted = 0, shifted_sq = 0;
  for (int64_t i = 0; i < t.size(); ++i) {
    const double p = out[i], y = t[i];
    const double d = p - y, s = y - reference_;
    hits += (p > 0) == (y >= 0.5);
    abs_error += std::abs(d);
    sq_error += d * d;
    shifted += s;
    shifted_sq += s * s;
  }
  v[EvalSums::kTop1] += hits;
  v[EvalSums::kElements] += static_cast<double>(t.size());
  v[EvalSums::kAbsError] += abs_error;
  v[EvalSums::kSqError] += sq_error;
  v[EvalSums::kShifted] += shifted;
  v[EvalSums::kShiftedSq] += shifted_sq;
  if (binary_) AccumulateBinary(out, t, sums);
}

void Objective::AccumulateBinary(const Tensor& out, const Tensor& t,
                                 EvalSums* sums) const {
  double positives = 0;
  for (int64_t i = 0; i < t.size(); ++i) {
    positives += t[i];
    // The threshold the accuracy uses, so that soft labels split alike.
    (t[i] >= 0.5f ? sums->positive_scores : sums->negative_scores)
        .push_back(out[i]);
  }
  sums->v[EvalSums::kPositives] += positives;
}

Metrics Objective::Finish(const EvalSums& sums) const {
  const double* v = sums.v;
  const double n = v[EvalSums::kSamples];
  if (n <= 0) return {};
  Metrics m = {{"loss", v[EvalSums::kLoss] / n}};
  if (token_targets_) {
    // Every window has the same length, so the mean over samples is the
    // mean over tokens. Perplexity is exp of the mean loss per token (with
    // label smoothing, of the smoothed loss).
    if (v[EvalSums::kElements] > 0) {
      m.emplace_back("accuracy", v[EvalSums::kTop1] / v[EvalSums::kElements]);
    }
    m.emplace_back("perplexity", std::exp(v[EvalSums::kLoss] / n));
    return m;
  }
  if (!float_targets_) {
    m.emplace_back("accuracy", v[EvalSums::kTop1] / n);
    // With five classes or fewer every label is in the top five.
    if (classes_ > 5) m.emplace_back("top5_accuracy", v[EvalSums::kTop5] / n);
    return m;
  }
  FinishFloats(sums, &m);
  return m;
}

void Objective::FinishFloats(const EvalSums& sums, Metrics* metrics) const {
  const double* v = sums.v;
  Metrics& m = *metrics;
  const double e = v[EvalSums::kElements];
  if (e <= 0) return;
  if (kind_ == BCE_WITH_LOGITS) {
    m.emplace_back("accuracy", v[EvalSums::kTop1] / e);
    if (binary_) FinishBinary(sums, metrics);
    return;
  }
  m.emplace_back("mse", v[EvalSums::kSqError] / e);
  m.emplace_back("mae", v[EvalSums::kAbsError] / e);
  // R² over all target elements pooled: 1 - SSE / SST.
  const double mean_shift = v[EvalSums::kShifted] / e;
  const double sst =
      v[EvalSums::kShiftedSq] - mean_shift * v[EvalSums::kShifted];
  if (sst > 0) m.emplace_back("r2", 1 - v[EvalSums::kSqError] / sst);
}

// Left out, like R² of constant targets, where the labels are of one class.
void Objective::FinishBinary(const EvalSums& sums, Metrics* m) const {
  const absl::StatusOr<double> auc =
      RocAucOfGroups(sums.positive_scores, sums.negative_scores);
  if (auc.ok()) m->emplace_back("auc", *auc);
  const double n = sums.v[EvalSums::kSamples];
  const absl::StatusOr<double> ne = NormalizedEntropy(
      sums.v[EvalSums::kLoss] / n, sums.v[EvalSums::kPositives] / n);
  if (ne.ok()) m->emplace_back("normalized_entropy", *ne);
}

double MetricOr(const Metrics& metrics, const std::string& name,
                double fallback) {
  for (const auto& [key, value] : metrics) {
    if (key == name) return value;
  }
  return fallback;
}

}  // namespace cohort

#include "worker/loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/logging.h"
#include "kernels/elementwise.h"
#include "kernels/parallel.h"

namespace cohort {
namespace {

// Index of the first maximum of a row, as torch.argmax reports it.
template <typename T>
int64_t ArgMax(const T* row, int64_t k) {
  int64_t best = 0;
  for (int64_t j = 1; j < k; ++j) {
    if (row[j] > row[best]) best = j;
  }
  return best;
}

// Cross-entropy of one row whose maximum is `m` against the target
// (1 - s) onehot(label) + s / k: (1 - s) (-log softmax[label]) + s mean_j
// (-log softmax[j]). When `g` is not null it receives (softmax(row) -
// target) * scale.
template <typename T>
double RowCrossEntropy(const T* row, int64_t k, T m, int64_t label, T smooth,
                       T scale, T* g) {
  double sum = 0, shifted = 0;
  for (int64_t j = 0; j < k; ++j) {
    const T e = std::exp(row[j] - m);
    sum += e;
    shifted += static_cast<double>(row[j] - m);
    if (g != nullptr) g[j] = e;
  }
  if (g != nullptr) {
    const T s = static_cast<T>(scale / sum);
    const T spread = scale * smooth / static_cast<T>(k);
    for (int64_t j = 0; j < k; ++j) g[j] = g[j] * s - spread;
    g[label] -= scale * (1 - smooth);
  }
  const double log_sum = std::log(sum);
  const double nll = log_sum - static_cast<double>(row[label] - m);
  if (smooth == 0) return nll;
  const double mean_nll = log_sum - shifted / static_cast<double>(k);
  return (1 - static_cast<double>(smooth)) * nll + smooth * mean_nll;
}

// Mean of f(pred[i], target[i]) over the elements, writing g(...) * scale
// to grad.
template <typename T, typename Loss>
T MeanOver(const BasicTensor<T>& pred, const BasicTensor<T>& target,
           BasicTensor<T>* grad, Loss loss) {
  const int64_t n = pred.size();
  if (n == 0) return T(0);
  if (grad != nullptr) EnsureShape(grad, pred.shape());
  const T scale = T(1) / static_cast<T>(n);
  T* g = grad != nullptr ? grad->data() : nullptr;
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    T d = 0;
    total += loss(pred[i], target[i], &d);
    if (g != nullptr) g[i] = d * scale;
  }
  return static_cast<T>(total / static_cast<double>(n));
}

}  // namespace

// Each row's (or position's) weight under `weighting`, and their sum.
template <typename Label>
double RowWeights(absl::Span<const Label> labels, int64_t classes,
                  const ClassWeighting& weighting, std::vector<double>* w) {
  CHECK(weighting.weights.empty() ||
        static_cast<int64_t>(weighting.weights.size()) == classes)
      << "cross-entropy: " << weighting.weights.size() << " class weights for "
      << classes << " classes";
  w->resize(labels.size());
  double total = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const int64_t label = static_cast<int64_t>(labels[i]);
    (*w)[i] = label >= 0 && label < classes ? weighting.Of(label) : 0;
    total += (*w)[i];
  }
  return total;
}

template <typename T>
T SoftmaxCrossEntropy(const BasicTensor<T>& logits,
                      absl::Span<const int32_t> labels, BasicTensor<T>* grad,
                      int64_t* correct, T label_smoothing,
                      const ClassWeighting& weighting) {
  CHECK_EQ(logits.rank(), 2)
      << "SoftmaxCrossEntropy: logits " << ShapeString(logits.shape());
  const int64_t n = logits.dim(0), k = logits.dim(1);
  CHECK_EQ(static_cast<int64_t>(labels.size()), n)
      << "SoftmaxCrossEntropy: " << labels.size() << " labels for " << n
      << " rows";
  if (grad != nullptr) EnsureShape(grad, {n, k});
  std::vector<double> w;
  const double weight_sum =
      weighting.active() ? RowWeights(labels, k, weighting, &w) : n;
  const double inv = weight_sum > 0 ? 1 / weight_sum : 0;
  double total = 0;
  int64_t hits = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = labels[i];
    CHECK(label >= 0 && label < k)
        << "SoftmaxCrossEntropy: label " << label << " of row " << i
        << " is outside [0, " << k << ")";
    const double wi = w.empty() ? 1.0 : w[i];
    const T* row = logits.data() + i * k;
    T* g = grad != nullptr ? grad->data() + i * k : nullptr;
    const int64_t best = ArgMax(row, k);
    total += wi * RowCrossEntropy(row, k, row[best], label, label_smoothing,
                                  static_cast<T>(wi * inv), g);
    hits += best == label;
  }
  if (correct != nullptr) *correct += hits;
  return static_cast<T>(total * inv);
}

namespace {

// Columns [j0, j0 + b) of SequenceCrossEntropy's {V, C} logits `x`; returns
// the block's summed loss. `m`, `sum`, `shifted` and `best` are scratch of
// b entries; `g` (or null) the gradient of the same layout as `x`.
// `w` (null: all 1) holds the columns' weights from j0 and `inv` is one
// over their sum over all columns.
template <typename T>
double SequenceBlock(const T* x, int64_t v_count, int64_t cols, int64_t j0,
                     int64_t b, const float* targets, T smooth, const double* w,
                     double inv, T* g, T* m, double* sum, double* shifted,
                     int64_t* best, int64_t* hits) {
  for (int64_t j = 0; j < b; ++j) {
    m[j] = x[j0 + j];
    best[j] = 0;
  }
  for (int64_t v = 1; v < v_count; ++v) {
    const T* row = x + v * cols + j0;
    for (int64_t j = 0; j < b; ++j) {
      if (row[j] > m[j]) {
        m[j] = row[j];
        best[j] = v;
      }
    }
  }
  std::fill(sum, sum + b, 0.0);
  std::fill(shifted, shifted + b, 0.0);
  for (int64_t v = 0; v < v_count; ++v) {
    const T* row = x + v * cols + j0;
    T* grow = g != nullptr ? g + v * cols + j0 : nullptr;
    for (int64_t j = 0; j < b; ++j) {
      const T d = row[j] - m[j];
      const T e = std::exp(d);
      sum[j] += e;
      shifted[j] += d;
      if (grow != nullptr) grow[j] = e;
    }
  }
  double total = 0;
  for (int64_t j = 0; j < b; ++j) {
    const int64_t label = static_cast<int64_t>(targets[j0 + j]);
    CHECK(label >= 0 && label < v_count && label == targets[j0 + j])
        << "SequenceCrossEntropy: target " << targets[j0 + j] << " of position "
        << j0 + j << " is not an id in [0, " << v_count << ")";
    const double log_sum = std::log(sum[j]);
    const double nll =
        log_sum - static_cast<double>(x[label * cols + j0 + j] - m[j]);
    const double wj = w != nullptr ? w[j] : 1.0;
    total += wj * (smooth == 0 ? nll
                               : (1 - static_cast<double>(smooth)) * nll +
                                     smooth * (log_sum - shifted[j] / v_count));
    *hits += best[j] == label;
  }
  if (g == nullptr) return total;
  // m and shifted now hold each column's gradient scale and spread.
  for (int64_t j = 0; j < b; ++j) {
    const T scale = static_cast<T>((w != nullptr ? w[j] : 1.0) * inv);
    m[j] = static_cast<T>(scale / sum[j]);
    shifted[j] = scale * smooth / static_cast<T>(v_count);
  }
  for (int64_t v = 0; v < v_count; ++v) {
    T* grow = g + v * cols + j0;
    for (int64_t j = 0; j < b; ++j) {
      grow[j] = grow[j] * m[j] - static_cast<T>(shifted[j]);
    }
  }
  for (int64_t j = 0; j < b; ++j) {
    const int64_t label = static_cast<int64_t>(targets[j0 + j]);
    const T scale = static_cast<T>((w != nullptr ? w[j] : 1.0) * inv);
    g[label * cols + j0 + j] -= scale * (1 - smooth);
  }
  return total;
}

}  // namespace

template <typename T>
T SequenceCrossEntropy(const BasicTensor<T>& logits,
                       absl::Span<const float> targets, BasicTensor<T>* grad,
                       int64_t* correct, T label_smoothing,
                       const ClassWeighting& weighting) {
  CHECK_EQ(logits.rank(), 3)
      << "SequenceCrossEntropy: logits " << ShapeString(logits.shape());
  const int64_t v_count = logits.dim(0);
  const int64_t cols = logits.dim(1) * logits.dim(2);
  CHECK_EQ(static_cast<int64_t>(targets.size()), cols)
      << "SequenceCrossEntropy: " << targets.size() << " targets for " << cols
      << " positions";
  if (grad != nullptr) EnsureShape(grad, logits.shape());
  if (cols == 0) return T(0);
  std::vector<double> w;
  const double weight_sum = weighting.active()
                                ? RowWeights(targets, v_count, weighting, &w)
                                : static_cast<double>(cols);
  const double inv = weight_sum > 0 ? 1 / weight_sum : 0;
  // 256 columns: the block's rows stay in L1 between the passes. Blocks
  // run on the compute threads; their losses are added in block order
  // afterwards, so the total has the same bits at every thread count.
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (cols + kBlock - 1) / kBlock;
  std::vector<double> totals(blocks);
  std::vector<int64_t> hits(blocks);
  ParallelItems(blocks, 1, [&](int64_t first, int64_t last) {
    T m[kBlock];
    double sum[kBlock], shifted[kBlock];
    int64_t best[kBlock];
    for (int64_t i = first; i < last; ++i) {
      const int64_t j0 = i * kBlock, b = std::min(kBlock, cols - j0);
      totals[i] =
          SequenceBlock(logits.data(), v_count, cols, j0, b, targets.data(),
                        label_smoothing, w.empty() ? nullptr : w.data() + j0,
                        inv, grad != nullptr ? grad->data() : nullptr, m, sum,
                        shifted, best, &hits[i]);
    }
  });
  double total = 0;
  for (int64_t i = 0; i < blocks; ++i) {
    total += totals[i];
    if (correct != nullptr) *correct += hits[i];
  }
  return static_cast<T>(total * inv);
}

template <typename T>
T MeanSquaredError(const BasicTensor<T>& pred, const BasicTensor<T>& target,
                   BasicTensor<T>* grad) {
  CHECK_EQ(pred.size(), target.size())
      << "MeanSquaredError: prediction " << ShapeString(pred.shape())
      << " vs target " << ShapeString(target.shape());
  const int64_t n = pred.size();
  if (n == 0) return T(0);
  if (grad != nullptr) EnsureShape(grad, pred.shape());
  const T g_scale = T(2) / static_cast<T>(n);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const T diff = pred[i] - target[i];
    total += static_cast<double>(diff) * diff;
    if (grad != nullptr) (*grad)[i] = g_scale * diff;
  }
  return static_cast<T>(total / static_cast<double>(n));
}

template <typename T>
int64_t CountTopK(const BasicTensor<T>& logits,
                  absl::Span<const int32_t> labels, int k) {
  CHECK_EQ(logits.rank(), 2)
      << "CountTopK: logits " << ShapeString(logits.shape());
  const int64_t n = logits.dim(0), classes = logits.dim(1);
  CHECK_EQ(static_cast<int64_t>(labels.size()), n);
  int64_t hits = 0;
  for (int64_t i = 0; i < n; ++i) {
    const T* row = logits.data() + i * classes;
    const int64_t label = labels[i];
    const T v = row[label];
    // The label's rank: logits above it, and equal ones before it.
    int64_t ahead = 0;
    for (int64_t j = 0; j < classes && ahead < k; ++j) {
      ahead += row[j] > v || (row[j] == v && j < label);
    }
    hits += ahead < k;
  }
  return hits;
}

template <typename T>
T ElementwiseLoss(ElementLoss kind, T delta, const BasicTensor<T>& pred,
                  const BasicTensor<T>& target, BasicTensor<T>* grad) {
  CHECK_EQ(pred.size(), target.size())
      << "ElementwiseLoss: prediction " << ShapeString(pred.shape())
      << " vs target " << ShapeString(target.shape());
  switch (kind) {
    case ElementLoss::kMse:
      return MeanSquaredError(pred, target, grad);
    case ElementLoss::kL1:
      return MeanOver(pred, target, grad, [](T p, T t, T* d) {
        const T x = p - t;
        *d = static_cast<T>((x > 0) - (x < 0));
        return static_cast<double>(std::abs(x));
      });
    case ElementLoss::kHuber:
      return MeanOver(pred, target, grad, [delta](T p, T t, T* d) {
        const T x = p - t;
        if (std::abs(x) < delta) {
          *d = x;
          return 0.5 * x * x;
        }
        *d = x > 0 ? delta : -delta;
        return static_cast<double>(delta) * (std::abs(x) - 0.5 * delta);
      });
    case ElementLoss::kBce:
      return MeanOver(pred, target, grad, [](T p, T t, T* d) {
        const double e = std::exp(-std::abs(static_cast<double>(p)));
        // sigmoid(p), from e = exp(-|p|) without overflow either way.
        const double sig = p >= 0 ? 1 / (1 + e) : e / (1 + e);
        *d = static_cast<T>(sig - t);
        return std::max<double>(p, 0) - static_cast<double>(p) * t +
               std::log1p(e);
      });
  }
  return T(0);
}

template float SoftmaxCrossEntropy<float>(const Tensor&,
                                          absl::Span<const int32_t>, Tensor*,
                                          int64_t*, float,
                                          const ClassWeighting&);
template double SoftmaxCrossEntropy<double>(const TensorD&,
                                            absl::Span<const int32_t>, TensorD*,
                                            int64_t*, double,
                                            const ClassWeighting&);
template float SequenceCrossEntropy<float>(const Tensor&,
                                           absl::Span<const float>, Tensor*,
                                           int64_t*, float,
                                           const ClassWeighting&);
template double SequenceCrossEntropy<double>(const TensorD&,
                                             absl::Span<const float>, TensorD*,
                                             int64_t*, double,
                                             const ClassWeighting&);
template int64_t CountTopK<float>(const Tensor&, absl::Span<const int32_t>,
                                  int);
template int64_t CountTopK<double>(const TensorD&, absl::Span<const int32_t>,
                                   int);
template float ElementwiseLoss<float>(ElementLoss, float, const Tensor&,
                                      const Tensor&, Tensor*);
template double ElementwiseLoss<double>(ElementLoss, double, const TensorD&,
                                        const TensorD&, TensorD*);
template float MeanSquaredError<float>(const Tensor&, const Tensor&, Tensor*);
template double MeanSquaredError<double>(const TensorD&, const TensorD&,
                                         TensorD*);

}  // namespace cohort

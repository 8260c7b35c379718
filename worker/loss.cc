#include "worker/loss.h"

#include <cmath>

#include "common/logging.h"
#include "kernels/elementwise.h"

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

// Cross-entropy of one row whose maximum is `m`, -log softmax(row)[label];
// when `g` is not null it receives (softmax(row) - onehot(label)) * scale.
template <typename T>
double RowCrossEntropy(const T* row, int64_t k, T m, int64_t label, T scale,
                       T* g) {
  double sum = 0;
  for (int64_t j = 0; j < k; ++j) {
    const T e = std::exp(row[j] - m);
    sum += e;
    if (g != nullptr) g[j] = e;
  }
  if (g != nullptr) {
    const T s = static_cast<T>(scale / sum);
    for (int64_t j = 0; j < k; ++j) g[j] *= s;
    g[label] -= scale;
  }
  return std::log(sum) - static_cast<double>(row[label] - m);
}

}  // namespace

template <typename T>
T SoftmaxCrossEntropy(const BasicTensor<T>& logits,
                      absl::Span<const int32_t> labels, BasicTensor<T>* grad,
                      int64_t* correct) {
  CHECK_EQ(logits.rank(), 2)
      << "SoftmaxCrossEntropy: logits " << ShapeString(logits.shape());
  const int64_t n = logits.dim(0), k = logits.dim(1);
  CHECK_EQ(static_cast<int64_t>(labels.size()), n)
      << "SoftmaxCrossEntropy: " << labels.size() << " labels for " << n
      << " rows";
  if (grad != nullptr) EnsureShape(grad, {n, k});
  const T scale = T(1) / static_cast<T>(n);
  double total = 0;
  int64_t hits = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = labels[i];
    CHECK(label >= 0 && label < k)
        << "SoftmaxCrossEntropy: label " << label << " of row " << i
        << " is outside [0, " << k << ")";
    const T* row = logits.data() + i * k;
    T* g = grad != nullptr ? grad->data() + i * k : nullptr;
    const int64_t best = ArgMax(row, k);
    total += RowCrossEntropy(row, k, row[best], label, scale, g);
    hits += best == label;
  }
  if (correct != nullptr) *correct += hits;
  return n > 0 ? static_cast<T>(total / static_cast<double>(n)) : T(0);
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

template float SoftmaxCrossEntropy<float>(const Tensor&,
                                          absl::Span<const int32_t>, Tensor*,
                                          int64_t*);
template double SoftmaxCrossEntropy<double>(const TensorD&,
                                            absl::Span<const int32_t>, TensorD*,
                                            int64_t*);
template float MeanSquaredError<float>(const Tensor&, const Tensor&, Tensor*);
template double MeanSquaredError<double>(const TensorD&, const TensorD&,
                                         TensorD*);

}  // namespace cohort

// The sums over one contiguous row that the per-sample normalisations
// (LayerNorm, GroupNorm; worker/layers/norm.h) take in double: the mean,
// the squared deviations from it, and the backward pass's sums of dy and
// dy * xh, with xh = (x - mean) * invstd.
//
// Each sum runs in several independent vector accumulators, added in a
// fixed order at the end: the result depends on the row alone, not on a
// thread count. One accumulator chain waited on each addition's latency
// (a LayerNorm over 32x16x16 samples took 1.7x PyTorch's time), and GCC's
// own vectorization of such loops shuffled and spilled more than it summed.
//
// Pure functions; thread-safe.
#ifndef COHORT_KERNELS_NORM_ROWS_H_
#define COHORT_KERNELS_NORM_ROWS_H_

#include <cstdint>

namespace cohort {

// Sum of x[0, n).
template <typename T>
double RowSum(const T* x, int64_t n);

// Sum of (x - mean)^2 over [0, n).
template <typename T>
double RowSquaredDeviations(const T* x, int64_t n, double mean);

// Sums of g and g * xh over a row.
struct RowGradSums {
  double g = 0;
  double g_xh = 0;
};

// g = dy: the sums of a row whose weight is one value (or none).
template <typename T>
RowGradSums RowGradientSums(const T* x, const T* dy, int64_t n, double mean,
                            double invstd);

// g = dy * w[p], a weight per element. Unless dw is null, also adds
// dy * xh into dw[p] and dy into db[p] (LayerNorm's parameter gradients,
// summed over samples), as AddRowParamGrads does.
template <typename T>
RowGradSums RowGradientSumsPerElement(const T* x, const T* dy, const T* w,
                                      int64_t n, double mean, double invstd,
                                      double* dw, double* db);

// dw[p] += dy * xh and db[p] += dy over a row: the same bits as
// RowGradientSumsPerElement's, wherever the row is cut.
template <typename T>
void AddRowParamGrads(const T* x, const T* dy, int64_t n, double mean,
                      double invstd, double* dw, double* db);

}  // namespace cohort

#endif  // COHORT_KERNELS_NORM_ROWS_H_

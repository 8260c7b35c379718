#include "kernels/low_rank.h"

#include <cmath>
#include <vector>

namespace cohort {

// Column sums run over rows in order, in double, so that the norms and
// projections of long factors (a 2048 x 4 P) lose nothing to float
// accumulation and do not depend on vector width.
void OrthogonalizeColumns(float* m, int64_t rows, int cols, float epsilon) {
  std::vector<double> dots(cols);
  for (int i = 0; i < cols; ++i) {
    double sq = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const double v = m[r * cols + i];
      sq += v * v;
    }
    const float norm = static_cast<float>(std::sqrt(sq)) + epsilon;
    const float inv = norm > 0 ? 1.0f / norm : 0.0f;
    for (int64_t r = 0; r < rows; ++r) m[r * cols + i] *= inv;
    if (i + 1 == cols) break;
    for (int j = i + 1; j < cols; ++j) dots[j] = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = m + r * cols;
      for (int j = i + 1; j < cols; ++j) dots[j] += double{row[i]} * row[j];
    }
    for (int64_t r = 0; r < rows; ++r) {
      float* row = m + r * cols;
      for (int j = i + 1; j < cols; ++j) {
        row[j] -= static_cast<float>(dots[j]) * row[i];
      }
    }
  }
}

}  // namespace cohort

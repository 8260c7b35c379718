#include "worker/exchange/replica_sum.h"

namespace cohort {

void SumReplicasInto(const std::vector<float*>& grads, int count, int64_t from,
                     int64_t to, float scale) {
  if (from >= to) return;
  float* g0 = grads[0];
  for (int q = 1; q < count; ++q) {
    const float* gq = grads[q];
    for (int64_t i = from; i < to; ++i) g0[i] += gq[i];
  }
  if (scale == 1.0f) return;
  for (int64_t i = from; i < to; ++i) g0[i] *= scale;
}

}  // namespace cohort

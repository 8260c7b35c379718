#include "worker/compute_threads.h"

#include <cblas.h>
#include <omp.h>

namespace cohort {

void SetComputeThreads(int threads) {
  if (threads < 1) threads = 1;
  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);
}

}  // namespace cohort

#include "worker/compute_threads.h"

#include <omp.h>

#include "kernels/conv_onednn.h"

namespace cohort {

void SetComputeThreads(int threads) {
  if (threads < 1) threads = 1;
  // OpenBLAS stays single-threaded (kernels/gemm.h splits products over
  // the OpenMP team instead).
  omp_set_num_threads(threads);
  // OpenMP's count is per thread: replica threads other than this one get
  // it from oneDNN's calls.
  SetOnednnThreads(threads);
}

int ComputeThreads() { return omp_get_max_threads(); }

}  // namespace cohort

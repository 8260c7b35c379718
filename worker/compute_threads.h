// How many threads the compute kernels may use for one call: the OpenMP
// team that runs oneDNN, the blocked kernels and the products that
// kernels/gemm.h splits. The trainer sets this once per process; by default
// each replica computes on the thread that drives it.
#ifndef COHORT_WORKER_COMPUTE_THREADS_H_
#define COHORT_WORKER_COMPUTE_THREADS_H_

namespace cohort {

// Thread-safe to call, but affects the whole process.
void SetComputeThreads(int threads);

// The compute threads of a call made on this thread now: the last
// SetComputeThreads, else OMP_NUM_THREADS, else one per core.
int ComputeThreads();

}  // namespace cohort

#endif  // COHORT_WORKER_COMPUTE_THREADS_H_

// The OpenMP thread count of oneDNN's calls (convolutions and products).
//
// OpenMP's thread count is a per-thread setting, and a replica thread
// started after omp_set_num_threads does not inherit it; every kernel that
// calls oneDNN applies the process-wide count to its own thread first.
//
// Thread safety: both functions are thread-safe.
#ifndef COHORT_KERNELS_ONEDNN_THREADS_H_
#define COHORT_KERNELS_ONEDNN_THREADS_H_

namespace cohort {

// The OpenMP threads each oneDNN call may use, process-wide; 0 (the
// default) leaves OpenMP's own setting.
void SetOnednnThreads(int threads);

// Applies SetOnednnThreads's count to the calling thread.
void ApplyOnednnThreads();

}  // namespace cohort

#endif  // COHORT_KERNELS_ONEDNN_THREADS_H_

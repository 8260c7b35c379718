// The OpenMP thread count of oneDNN's calls (convolutions and products).
//
// OpenMP's thread count is a per-thread setting, and a replica thread
// started after omp_set_num_threads does not inherit it; every kernel that
// calls oneDNN applies the process-wide count to its own thread first.
//
// Thread safety: the functions are thread-safe; an OnednnAlone acts on the
// thread that made it.
#ifndef COHORT_KERNELS_ONEDNN_THREADS_H_
#define COHORT_KERNELS_ONEDNN_THREADS_H_

namespace cohort {

// The OpenMP threads each oneDNN call may use, process-wide; 0 (the
// default) leaves OpenMP's own setting.
void SetOnednnThreads(int threads);

// Applies SetOnednnThreads's count to the calling thread, or 1 while the
// thread holds an OnednnAlone.
void ApplyOnednnThreads();

// While alive, the calling thread's oneDNN calls run on it alone: one of
// two passes that a team of two runs side by side, each on its own thread.
// Not movable; nests.
class OnednnAlone {
 public:
  OnednnAlone();
  ~OnednnAlone();
  OnednnAlone(const OnednnAlone&) = delete;
  OnednnAlone& operator=(const OnednnAlone&) = delete;
};

}  // namespace cohort

#endif  // COHORT_KERNELS_ONEDNN_THREADS_H_

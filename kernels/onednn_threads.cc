#include "kernels/onednn_threads.h"

#include <omp.h>

#include <atomic>

namespace cohort {
namespace {

std::atomic<int> g_onednn_threads{0};
thread_local int t_alone = 0;  // live OnednnAlone objects of this thread

}  // namespace

void SetOnednnThreads(int threads) {
  g_onednn_threads.store(threads, std::memory_order_relaxed);
}

void ApplyOnednnThreads() {
  const int threads =
      t_alone > 0 ? 1 : g_onednn_threads.load(std::memory_order_relaxed);
  if (threads > 0 && omp_get_max_threads() != threads) {
    omp_set_num_threads(threads);
  }
}

OnednnAlone::OnednnAlone() { ++t_alone; }

OnednnAlone::~OnednnAlone() { --t_alone; }

}  // namespace cohort

#include "kernels/onednn_threads.h"

#include <omp.h>

#include <atomic>

namespace cohort {
namespace {

std::atomic<int> g_onednn_threads{0};

}  // namespace

void SetOnednnThreads(int threads) {
  g_onednn_threads.store(threads, std::memory_order_relaxed);
}

void ApplyOnednnThreads() {
  const int threads = g_onednn_threads.load(std::memory_order_relaxed);
  if (threads > 0 && omp_get_max_threads() != threads) {
    omp_set_num_threads(threads);
  }
}

}  // namespace cohort

// Software prefetch for loops that stream through memory mostly reading.
//
// The hardware prefetchers stop at every 4 KiB page, and on the 2-core
// Xeon VMs cohort is measured on a loop that only reads one stream (a sum
// of squares, a batch norm's mean and variance) ran at 5-6 GB/s; asking
// for the line 4 KiB ahead on every 64 bytes read took those to 9-12 GB/s
// (docs/BENCHMARKS.md). Loops that write as much as they read (an
// optimizer step) were already at the memory's speed and gained nothing.
//
// A prefetch is a hint: one past the end of an array neither faults nor
// changes a result. Thread safety: none needed.
#ifndef COHORT_KERNELS_PREFETCH_H_
#define COHORT_KERNELS_PREFETCH_H_

#include <cstdint>

namespace cohort {

// How far ahead of the element being read to ask for its cache line.
inline constexpr int64_t kPrefetchBytes = 4096;

// Asks for the cache line kPrefetchBytes past p; call once per 64 bytes
// that a loop reads through p.
template <typename T>
inline void PrefetchAhead(const T* p) {
  __builtin_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes, 0, 3);
}

}  // namespace cohort

#endif  // COHORT_KERNELS_PREFETCH_H_

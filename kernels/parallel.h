// Splits a loop over [0, n) into contiguous ranges run on the calling
// thread's OpenMP team (the compute threads of kernels/onednn_threads.h).
//
// Each index is handled by exactly one range, in the same order as the
// serial loop, so a body that writes only its own indices gives identical
// results at every thread count: nothing is reduced across ranges. Range
// boundaries fall on multiples of kRangeAlign indices, so a vectorized body
// splits into vector steps and a scalar tail exactly where the serial loop
// does (the tail may round differently, e.g. without fused multiply-adds),
// and threads do not share cache lines; ParallelItems splits loops over
// coarse independent items evenly instead. Loops too short to pay for
// waking the team run serially on the caller.
//
// A user of this header compiles and links with -fopenmp. Thread safety:
// the body runs concurrently on disjoint ranges.
#ifndef COHORT_KERNELS_PARALLEL_H_
#define COHORT_KERNELS_PARALLEL_H_

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "kernels/onednn_threads.h"

namespace cohort {

inline constexpr int64_t kRangeAlign = 16;

namespace parallel_internal {

// Runs body(begin, end) for `parts` ranges of [0, n) whose boundaries
// `boundary(p)` gives, one range per thread of the caller's team.
template <typename Boundary, typename Body>
void RunRanges(int64_t parts, const Boundary& boundary, const Body& body) {
#pragma omp parallel for num_threads(parts) schedule(static)
  for (int64_t p = 0; p < parts; ++p) body(boundary(p), boundary(p + 1));
}

}  // namespace parallel_internal

// Runs body(begin, end) over ranges of at least `grain` indices each
// (`grain` at least kRangeAlign).
template <typename Body>
void ParallelRanges(int64_t n, int64_t grain, const Body& body) {
  ApplyOnednnThreads();
  const int64_t parts = std::min<int64_t>(
      omp_get_max_threads(), n / std::max<int64_t>(grain, kRangeAlign));
  if (parts <= 1) {
    body(int64_t{0}, n);
    return;
  }
  parallel_internal::RunRanges(
      parts,
      [&](int64_t p) {
        return p == parts ? n : n * p / parts / kRangeAlign * kRangeAlign;
      },
      body);
}

// ParallelRanges for loops over independent items (channels, planes,
// attention heads) rather than vector lanes: ranges of at least `grain`
// items whose boundaries fall anywhere, so that a few items still split
// evenly (48 items on two threads: 24 each, where aligned ranges give 16
// and 32, and 8 items run on both threads rather than one).
template <typename Body>
void ParallelItems(int64_t n, int64_t grain, const Body& body) {
  ApplyOnednnThreads();
  const int64_t parts =
      std::min<int64_t>(omp_get_max_threads(), n / std::max<int64_t>(grain, 1));
  if (parts <= 1) {
    body(int64_t{0}, n);
    return;
  }
  parallel_internal::RunRanges(
      parts, [&](int64_t p) { return n * p / parts; }, body);
}

// Scratch for ParallelRanges and ParallelItems bodies: RangeSlots() slots, one
// per compute thread; a body running now may use slot RangeSlot() alone.
inline int64_t RangeSlots() {
  ApplyOnednnThreads();
  return omp_get_max_threads();
}
inline int64_t RangeSlot() { return omp_get_thread_num(); }

// Elements per range of a streaming elementwise loop: below this, waking
// a second thread costs more than it saves.
inline constexpr int64_t kElementwiseGrain = int64_t{1} << 15;

// The grain of ParallelItems over items of `per_item` elements each: about
// kElementwiseGrain elements a range.
inline int64_t ItemGrain(int64_t per_item) {
  per_item = std::max<int64_t>(per_item, 1);
  return (kElementwiseGrain + per_item - 1) / per_item;
}

}  // namespace cohort

#endif  // COHORT_KERNELS_PARALLEL_H_

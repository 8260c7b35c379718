// Splits a loop over [0, n) into contiguous ranges run on the calling
// thread's OpenMP team (the compute threads of kernels/onednn_threads.h).
//
// Each index is handled by exactly one range, in the same order as the
// serial loop within a range, so a body that writes only its own indices
// gives identical results at every thread count and whichever thread runs
// a range: nothing is reduced across ranges. Range boundaries fall on
// multiples of kRangeAlign indices, so a vectorized body splits into vector
// steps and a scalar tail exactly where the serial loop does (the tail may
// round differently, e.g. without fused multiply-adds), and threads do not
// share cache lines; ParallelItems splits loops over coarse independent
// items evenly instead. Loops too short to pay for waking the team run
// serially on the caller.
//
// Each thread owns an equal contiguous share of the loop, cut into a few
// chunks that it runs front to back; a thread that finishes its share takes
// chunks from the back of another's. On two cores whose speeds differ from
// moment to moment (a virtual machine's cores do), a loop then ends when the
// work is done rather than when the slower core finishes half of it, while
// each thread still works on the same part of a tensor from one loop to the
// next (the chunks it loses are the last of its share).
//
// A user of this header compiles and links with -fopenmp. Thread safety:
// the body runs concurrently on disjoint ranges.
#ifndef COHORT_KERNELS_PARALLEL_H_
#define COHORT_KERNELS_PARALLEL_H_

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "kernels/onednn_threads.h"

namespace cohort {

inline constexpr int64_t kRangeAlign = 16;

namespace parallel_internal {

// Chunks per thread's share: enough that the tail a faster thread takes
// over is a small part of the loop, few enough that a chunk's call costs
// nothing next to its work.
inline constexpr int64_t kChunksPerShare = 8;

// One share's chunks not yet started, [front, back), packed into one word
// so that its owner (taking the front) and a thief (taking the back) never
// both take the last chunk. Aligned so that shares do not share a line.
struct alignas(64) Share {
  std::atomic<uint64_t> span;

  void Reset(uint32_t chunks) {
    span.store(uint64_t{chunks} << 32, std::memory_order_relaxed);
  }
  // Takes the front chunk (owner) or the back chunk (thief); false when
  // none is left. `*index` is the chunk's index within the share.
  bool Take(bool front, uint32_t* index) {
    uint64_t s = span.load(std::memory_order_relaxed);
    for (;;) {
      const uint32_t f = static_cast<uint32_t>(s), b = s >> 32;
      if (f >= b) return false;
      const uint64_t next = front ? s + 1 : s - (uint64_t{1} << 32);
      if (span.compare_exchange_weak(s, next, std::memory_order_relaxed)) {
        *index = front ? f : b - 1;
        return true;
      }
    }
  }
};

// Runs body(boundary(c), boundary(c + 1)) for every chunk c of
// [0, parts * per_share), share p being chunks [p * per_share, (p + 1) *
// per_share). Thread p of the team runs share p front to back, then takes
// the others' chunks from their backs; a share whose thread the team lacks
// (OpenMP may give fewer threads than asked) is taken whole that way.
template <typename Boundary, typename Body>
void RunShares(int64_t parts, int64_t per_share, const Boundary& boundary,
               const Body& body) {
  std::vector<Share> shares(parts);
  for (Share& s : shares) s.Reset(static_cast<uint32_t>(per_share));
  const auto run = [&](int64_t share, uint32_t index) {
    const int64_t c = share * per_share + index;
    const int64_t begin = boundary(c), end = boundary(c + 1);
    if (begin < end) body(begin, end);
  };
#pragma omp parallel num_threads(parts)
  {
    const int64_t me = omp_get_thread_num();
    uint32_t index;
    while (shares[me].Take(/*front=*/true, &index)) run(me, index);
    for (int64_t k = 1; k < parts; ++k) {
      const int64_t other = (me + k) % parts;
      while (shares[other].Take(/*front=*/false, &index)) run(other, index);
    }
  }
}

// Chunks per share for `n` indices in `parts` shares when a chunk should
// hold at least `least` indices.
inline int64_t PerShare(int64_t n, int64_t parts, int64_t least) {
  return std::clamp<int64_t>(n / (parts * std::max<int64_t>(least, 1)), 1,
                             kChunksPerShare);
}

}  // namespace parallel_internal

// Runs body(begin, end) over ranges of [0, n), on one thread per `grain`
// indices (`grain` at least kRangeAlign) up to the team's size; each
// thread's share is cut into chunks of at least kRangeAlign indices.
template <typename Body>
void ParallelRanges(int64_t n, int64_t grain, const Body& body) {
  ApplyOnednnThreads();
  const int64_t parts = std::min<int64_t>(
      omp_get_max_threads(), n / std::max<int64_t>(grain, kRangeAlign));
  if (parts <= 1) {
    body(int64_t{0}, n);
    return;
  }
  const int64_t chunks =
      parts * parallel_internal::PerShare(n, parts, kRangeAlign);
  parallel_internal::RunShares(
      parts, chunks / parts,
      [&](int64_t c) {
        return c == chunks ? n : n * c / chunks / kRangeAlign * kRangeAlign;
      },
      body);
}

// ParallelRanges for loops over independent items (channels, planes,
// attention heads) rather than vector lanes: one thread per `grain` items,
// and boundaries that fall anywhere, so that a few items still split
// evenly (48 items on two threads: 24 each in chunks of 3, where aligned
// ranges give 16 and 32, and 8 items run on both threads rather than one).
template <typename Body>
void ParallelItems(int64_t n, int64_t grain, const Body& body) {
  ApplyOnednnThreads();
  const int64_t parts =
      std::min<int64_t>(omp_get_max_threads(), n / std::max<int64_t>(grain, 1));
  if (parts <= 1) {
    body(int64_t{0}, n);
    return;
  }
  const int64_t chunks = parts * parallel_internal::PerShare(n, parts, 1);
  parallel_internal::RunShares(
      parts, chunks / parts, [&](int64_t c) { return n * c / chunks; }, body);
}

// Scratch for ParallelRanges and ParallelItems bodies: RangeSlots() slots, one
// per compute thread; a body running now may use slot RangeSlot() alone.
inline int64_t RangeSlots() {
  ApplyOnednnThreads();
  return omp_get_max_threads();
}
inline int64_t RangeSlot() { return omp_get_thread_num(); }

// The distance, in T, between the slots of a buffer of RangeSlots() slots
// of `elements` T each: at least one whole 4 KB page between the end of
// one slot and the start of the next, wherever the buffer starts. A core's
// hardware prefetchers run ahead within a page, so a slot that ends in the
// page where the next begins is likely to pull the other thread's lines into
// its cache while that thread writes them: a depthwise weight gradient, which
// rewrites a few rows of partial sums per output row, ran 1.6x slower on two
// threads with 2 KB slots side by side, or 64 bytes apart, than 1 KB apart.
template <typename T>
int64_t SlotLength(int64_t elements) {
  constexpr int64_t kPage = 4096 / static_cast<int64_t>(sizeof(T));
  return (elements + 2 * kPage - 1) / kPage * kPage;
}

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

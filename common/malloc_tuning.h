// Process-wide glibc malloc settings for a process that moves large
// buffers every step (gRPC messages of tensor chunks, staging buffers).
//
// By default glibc serves allocations of 128 KiB and up with mmap, raises
// that threshold only after frees, and returns free memory at the top of
// the heap to the kernel. A process that allocates and frees the same
// megabyte-sized buffers every step then page-faults them in again every
// step: the parameter-server path moved a 1 MiB model at 0.33 GB/s that
// way, and at 0.85-1.0 GB/s with these settings (bench/ps_bandwidth, see
// docs/BENCHMARKS.md).
//
// Thread safety: call once, first thing in main(), before other threads.
#ifndef COHORT_COMMON_MALLOC_TUNING_H_
#define COHORT_COMMON_MALLOC_TUNING_H_

namespace cohort {

// Serves allocations up to 32 MiB (mallopt's maximum) from the heap and
// keeps up to 256 MiB of freed memory instead of trimming it. A variable
// MALLOC_*_ in the environment, when set, is left to win.
void KeepLargeBuffersResident();

}  // namespace cohort

#endif  // COHORT_COMMON_MALLOC_TUNING_H_

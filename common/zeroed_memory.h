// Zero-filled, 64-byte-aligned host memory for tensors.
//
// Large blocks come straight from the kernel (mmap), 2 MiB-aligned and
// marked for transparent huge pages: fresh anonymous memory is already zero,
// so nothing is written up front, and a network's activations fault in one
// huge page at a time instead of 512 small ones. On virtual machines a page
// fault costs several microseconds, enough to dominate the first training
// step of a ResNet-50 with small pages. Small blocks come from malloc and
// are cleared.
//
// Thread safety: both functions are thread-safe. Ownership: the caller owns
// the block and returns it with FreeZeroed and the same `bytes`.
#ifndef COHORT_COMMON_ZEROED_MEMORY_H_
#define COHORT_COMMON_ZEROED_MEMORY_H_

#include <cstddef>

namespace cohort {

// Blocks of at least this many bytes are mapped directly.
inline constexpr size_t kMappedBlockBytes = size_t{2} << 20;

// `bytes` zero bytes at a 64-byte-aligned address; null when out of memory
// (or when `bytes` is 0).
void* AllocateZeroed(size_t bytes);

// Returns a block from AllocateZeroed(bytes). Null is ignored.
void FreeZeroed(void* p, size_t bytes);

}  // namespace cohort

#endif  // COHORT_COMMON_ZEROED_MEMORY_H_

#include "common/zeroed_memory.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace cohort {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kPage = 4096;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Maps `bytes` (rounded to pages) at a huge-page boundary: maps one huge
// page more than needed and gives back the unaligned head and the tail.
void* MapAligned(size_t bytes) {
  const size_t length = RoundUp(bytes, kPage);
  void* raw = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = RoundUp(start, kHugePage);
  if (aligned > start) munmap(raw, aligned - start);
  const size_t tail = start + length + kHugePage - (aligned + length);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + length), tail);
  void* p = reinterpret_cast<void*>(aligned);
  // Advice only: without transparent huge pages the block still works.
  madvise(p, length, MADV_HUGEPAGE);
  return p;
}

}  // namespace

void* AllocateZeroed(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (bytes >= kMappedBlockBytes) return MapAligned(bytes);
  void* p = std::aligned_alloc(64, RoundUp(bytes, 64));
  if (p != nullptr) std::memset(p, 0, bytes);
  return p;
}

void FreeZeroed(void* p, size_t bytes) {
  if (p == nullptr) return;
  if (bytes >= kMappedBlockBytes) {
    munmap(p, RoundUp(bytes, kPage));
  } else {
    std::free(p);
  }
}

}  // namespace cohort

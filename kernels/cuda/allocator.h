// A device-agnostic caching allocator: the core under the CUDA device
// allocator and the pinned host pool (kernels/cuda/memory.h), built and
// tested without CUDA.
//
// Why cache: cudaMalloc/cudaFree (and cudaHostAlloc/cudaFreeHost) are slow
// and cudaFree synchronizes the whole device, so a training step must not
// call them. Freed blocks stay in a free list and are handed out again for a
// later request of the same rounded size; after the first step the backend
// is no longer called.
#ifndef COHORT_KERNELS_CUDA_ALLOCATOR_H_
#define COHORT_KERNELS_CUDA_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace cohort {

// Where the memory really comes from (cudaMalloc, cudaHostAlloc, or a fake
// in tests). Implementations need not be thread-safe: CachingAllocator calls
// them under its own mutex.
struct AllocatorBackend {
  virtual ~AllocatorBackend() = default;
  // RESOURCE_EXHAUSTED when out of memory (that triggers the allocator's
  // empty-cache-and-retry); any other error is passed through.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  // Frees what Allocate returned. Cannot fail in a way the caller could act
  // on, so it reports nothing; implementations log errors.
  virtual void Free(void* p) = 0;
};

// A snapshot of a CachingAllocator. Byte counts are in rounded sizes.
struct AllocatorStats {
  size_t bytes_in_use = 0;  // handed out and not yet freed
  size_t bytes_cached = 0;  // freed, kept for reuse
  size_t blocks_in_use = 0;
  size_t blocks_cached = 0;
  int64_t backend_allocations = 0;  // successful backend Allocate calls
  int64_t backend_frees = 0;
  int64_t cache_hits = 0;   // requests served from the free list
  int64_t oom_retries = 0;  // backend OOMs answered by EmptyCache + retry
};

// Caches blocks from an AllocatorBackend.
//
// Rounding: a request is rounded up to a multiple of 512 bytes when it is at
// most 1 MiB, and to a multiple of 2 MiB above that (0 bytes counts as 512,
// so every Allocate returns a distinct pointer). A freed block is reused
// only for a request with exactly the same rounded size: no splitting, no
// handing a 64 MiB block to a 2 MiB request, so memory use stays predictable
// at the cost of a few extra backend calls while sizes settle.
//
// Out of memory: when the backend answers RESOURCE_EXHAUSTED, every cached
// block is returned to the backend (EmptyCache) and the request is retried
// once; if that fails too, Allocate returns RESOURCE_EXHAUSTED naming the
// request, the bytes in use and what was cached.
//
// Stream ordering (device memory): this core knows nothing of streams. A
// freed block may be handed out at once, so the caller must free a block
// only when no queued work still uses it: either synchronize the stream
// first, or use one stream for all work on this allocator's memory (then
// stream order alone makes reuse safe, as the next user's work is queued
// after the previous user's). The same holds for pinned host blocks that
// an async copy still reads.
//
// Ownership: owns the backend and the cached blocks; the destructor returns
// cached blocks to the backend. Blocks still in use at destruction are left
// alone (a stream may still be using them): the allocator must outlive every
// block it handed out.
//
// Thread safety: all methods are thread-safe (one mutex; backend calls are
// made under it, which serializes the rare cache misses).
class CachingAllocator {
 public:
  // `name` appears in error messages, e.g. "cuda:0 device memory".
  CachingAllocator(std::unique_ptr<AllocatorBackend> backend, std::string name);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` bytes (RoundUp(bytes) in fact).
  absl::StatusOr<void*> Allocate(size_t bytes);

  // Returns `p` (from Allocate) to the cache. Free(nullptr) does nothing;
  // a pointer this allocator does not own in use is INVALID_ARGUMENT.
  absl::Status Free(void* p);

  // Returns every cached block to the backend; blocks in use are kept.
  void EmptyCache();

  AllocatorStats stats() const;
  const std::string& name() const { return name_; }

  // The size a request for `bytes` occupies; 0 when that would overflow.
  static size_t RoundUp(size_t bytes);

  static constexpr size_t kSmallAlignment = 512;
  static constexpr size_t kSmallLimit = size_t{1} << 20;      // 1 MiB
  static constexpr size_t kLargeAlignment = size_t{2} << 20;  // 2 MiB

 private:
  // Pops a cached block of exactly `rounded` bytes, or nullptr.
  void* TakeCached(size_t rounded) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The backend allocation with one EmptyCache-and-retry on OOM.
  absl::StatusOr<void*> AllocateFromBackend(size_t bytes, size_t rounded)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EmptyCacheLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status OutOfMemory(size_t bytes, size_t rounded, size_t emptied,
                           const absl::Status& backend_error) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<AllocatorBackend> backend_;
  const std::string name_;
  mutable absl::Mutex mu_;
  // Rounded size -> cached blocks of that size.
  std::map<size_t, std::vector<void*>> free_ ABSL_GUARDED_BY(mu_);
  // Block in use -> its rounded size.
  std::unordered_map<void*, size_t> in_use_ ABSL_GUARDED_BY(mu_);
  AllocatorStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_ALLOCATOR_H_

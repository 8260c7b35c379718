#include "kernels/cuda/allocator.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cohort {

constexpr size_t CachingAllocator::kSmallAlignment;
constexpr size_t CachingAllocator::kSmallLimit;
constexpr size_t CachingAllocator::kLargeAlignment;

CachingAllocator::CachingAllocator(std::unique_ptr<AllocatorBackend> backend,
                                   std::string name)
    : backend_(std::move(backend)), name_(std::move(name)) {}

CachingAllocator::~CachingAllocator() {
  absl::MutexLock lock(&mu_);
  EmptyCacheLocked();
}

size_t CachingAllocator::RoundUp(size_t bytes) {
  if (bytes == 0) return kSmallAlignment;
  const size_t align = bytes <= kSmallLimit ? kSmallAlignment : kLargeAlignment;
  // Rounding must not wrap around to a small size for absurd requests.
  if (bytes > std::numeric_limits<size_t>::max() - (align - 1)) return 0;
  return (bytes + align - 1) / align * align;
}

absl::StatusOr<void*> CachingAllocator::Allocate(size_t bytes) {
  const size_t rounded = RoundUp(bytes);
  if (rounded == 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        name_, ": cannot allocate ", bytes, " bytes (size overflows)"));
  }
  absl::MutexLock lock(&mu_);
  void* p = TakeCached(rounded);
  if (p != nullptr) {
    ++stats_.cache_hits;
  } else {
    absl::StatusOr<void*> fresh = AllocateFromBackend(bytes, rounded);
    if (!fresh.ok()) return fresh.status();
    p = *fresh;
  }
  in_use_.emplace(p, rounded);
  stats_.bytes_in_use += rounded;
  ++stats_.blocks_in_use;
  return p;
}

void* CachingAllocator::TakeCached(size_t rounded) {
  auto it = free_.find(rounded);
  if (it == free_.end()) return nullptr;
  void* p = it->second.back();
  it->second.pop_back();
  if (it->second.empty()) free_.erase(it);
  stats_.bytes_cached -= rounded;
  --stats_.blocks_cached;
  return p;
}

absl::StatusOr<void*> CachingAllocator::AllocateFromBackend(size_t bytes,
                                                            size_t rounded) {
  absl::StatusOr<void*> p = backend_->Allocate(rounded);
  size_t emptied = 0;
  if (absl::IsResourceExhausted(p.status())) {
    // Cached blocks of other sizes may be what stands in the way.
    emptied = stats_.bytes_cached;
    EmptyCacheLocked();
    ++stats_.oom_retries;
    p = backend_->Allocate(rounded);
    if (absl::IsResourceExhausted(p.status())) {
      return OutOfMemory(bytes, rounded, emptied, p.status());
    }
  }
  if (!p.ok()) {
    return absl::Status(p.status().code(),
                        absl::StrCat(name_, ": allocating ", bytes,
                                     " bytes: ", p.status().message()));
  }
  if (*p == nullptr) {
    return absl::InternalError(absl::StrCat(
        name_, ": backend returned a null block for ", rounded, " bytes"));
  }
  ++stats_.backend_allocations;
  return p;
}

absl::Status CachingAllocator::OutOfMemory(
    size_t bytes, size_t rounded, size_t emptied,
    const absl::Status& backend_error) const {
  return absl::ResourceExhaustedError(absl::StrCat(
      name_, ": out of memory allocating ", bytes, " bytes (rounded to ",
      rounded, "); ", stats_.bytes_in_use, " bytes in use in ",
      stats_.blocks_in_use, " blocks; ", emptied,
      " cached bytes were freed before the retry; backend: ",
      backend_error.message()));
}

absl::Status CachingAllocator::Free(void* p) {
  if (p == nullptr) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  auto it = in_use_.find(p);
  if (it == in_use_.end()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: free of %p, which is not a block in use (double free or a "
        "pointer from elsewhere)",
        name_, p));
  }
  const size_t rounded = it->second;
  in_use_.erase(it);
  stats_.bytes_in_use -= rounded;
  --stats_.blocks_in_use;
  free_[rounded].push_back(p);
  stats_.bytes_cached += rounded;
  ++stats_.blocks_cached;
  return absl::OkStatus();
}

void CachingAllocator::EmptyCache() {
  absl::MutexLock lock(&mu_);
  EmptyCacheLocked();
}

void CachingAllocator::EmptyCacheLocked() {
  for (auto& entry : free_) {
    for (void* p : entry.second) {
      backend_->Free(p);
      ++stats_.backend_frees;
    }
  }
  free_.clear();
  stats_.bytes_cached = 0;
  stats_.blocks_cached = 0;
}

AllocatorStats CachingAllocator::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace cohort

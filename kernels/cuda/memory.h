// GPU memory for the CUDA backend: streams, a caching device allocator,
// RAII device buffers with async copies, and a pinned host pool for staging
// loader batches (CUDA builds only; nothing includes this under
// --config=nocuda).
//
// Typical use, one stream per worker:
//   ASSIGN_OR_RETURN(auto alloc, DeviceAllocator::Create(0));
//   ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create(0));
//   ASSIGN_OR_RETURN(auto buf, DeviceBuffer<float>::Allocate(alloc.get(), n));
//   RETURN_IF_ERROR(buf.CopyFromHost(host, stream));
//   ... kernels on stream.get() ...
//   RETURN_IF_ERROR(stream.Synchronize());
//
// Stream ordering: the allocators hand a freed block out again at once (see
// kernels/cuda/allocator.h). Destroy a DeviceBuffer (or PinnedBuffer) only
// when no queued work still uses it: after synchronizing its stream, or
// when all work on that allocator's memory runs on one stream.
#ifndef COHORT_KERNELS_CUDA_MEMORY_H_
#define COHORT_KERNELS_CUDA_MEMORY_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/cuda/allocator.h"

namespace cohort {

// A non-blocking CUDA stream on one device (does not synchronize with the
// legacy default stream). Owns the stream; move-only. Thread safety: the
// object is immutable, and CUDA streams may be used from any thread, but
// work queued from several threads runs in whatever order it was queued.
class CudaStream {
 public:
  // INVALID_ARGUMENT / UNAVAILABLE when `device` does not exist.
  static absl::StatusOr<CudaStream> Create(int device);

  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  ~CudaStream();

  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }

  // Waits for all queued work; reports faults from kernels on the stream.
  absl::Status Synchronize() const;

 private:
  CudaStream(int device, cudaStream_t stream)
      : device_(device), stream_(stream) {}
  void Destroy();

  int device_ = -1;
  cudaStream_t stream_ = nullptr;
};

// A CachingAllocator over cudaMalloc/cudaFree on one device (the current
// device is switched for each backend call and restored after). Owns the
// cached device memory; must outlive every block and DeviceBuffer it hands
// out. Thread-safe.
class DeviceAllocator {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceAllocator>> Create(int device);

  int device() const { return device_; }
  absl::StatusOr<void*> Allocate(size_t bytes) {
    return cache_.Allocate(bytes);
  }
  absl::Status Free(void* p) { return cache_.Free(p); }
  // cudaFree synchronizes the device: call between steps, not inside one.
  void EmptyCache() { cache_.EmptyCache(); }
  AllocatorStats stats() const { return cache_.stats(); }
  CachingAllocator* cache() { return &cache_; }

 private:
  explicit DeviceAllocator(int device);

  const int device_;
  CachingAllocator cache_;
};

// A CachingAllocator over cudaHostAlloc (portable: usable with every
// device) for page-locked staging buffers: copies from them are truly
// asynchronous and can overlap kernels. Owns the cached host memory; must
// outlive every PinnedBuffer. Thread-safe.
class PinnedHostPool {
 public:
  // UNAVAILABLE when no CUDA device (and so no driver) is present.
  static absl::StatusOr<std::unique_ptr<PinnedHostPool>> Create();

  absl::StatusOr<void*> Allocate(size_t bytes) {
    return cache_.Allocate(bytes);
  }
  absl::Status Free(void* p) { return cache_.Free(p); }
  void EmptyCache() { cache_.EmptyCache(); }
  AllocatorStats stats() const { return cache_.stats(); }
  CachingAllocator* cache() { return &cache_; }

 private:
  PinnedHostPool();

  CachingAllocator cache_;
};

namespace memory_internal {

// One block from a CachingAllocator, given back on destruction. Move-only.
class PooledBlock {
 public:
  PooledBlock() = default;
  static absl::StatusOr<PooledBlock> Allocate(CachingAllocator* cache,
                                              size_t bytes);
  PooledBlock(PooledBlock&& other) noexcept { *this = std::move(other); }
  PooledBlock& operator=(PooledBlock&& other) noexcept;
  ~PooledBlock() { Release(); }

  void* get() const { return p_; }

 private:
  PooledBlock(CachingAllocator* cache, void* p) : cache_(cache), p_(p) {}
  void Release();

  CachingAllocator* cache_ = nullptr;
  void* p_ = nullptr;
};

// `count` elements of `element_size` bytes, or INVALID_ARGUMENT naming
// `what` when that overflows size_t.
absl::StatusOr<size_t> ByteSize(size_t count, size_t element_size,
                                const char* what);

// cudaMemcpyAsync of `bytes` on `stream` after checking `count <= capacity`
// and that the stream is on `device`; `what` names the copy in errors.
absl::Status CopyAsync(void* dst, const void* src, size_t count,
                       size_t capacity, size_t element_size,
                       cudaMemcpyKind kind, int device,
                       const CudaStream& stream, const char* what);

}  // namespace memory_internal

// `size()` elements of T in device memory from a DeviceAllocator, returned
// to it on destruction (see the stream-ordering note above). Move-only.
// Copies are asynchronous on the caller's stream: host memory must stay
// valid (and, for CopyFromHost, unchanged) until the stream has run them.
// Thread safety: none; one owner at a time.
template <typename T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable<T>::value,
                "DeviceBuffer holds raw bytes copied with cudaMemcpy");

 public:
  DeviceBuffer() = default;

  // Uninitialized device memory for `size` elements.
  static absl::StatusOr<DeviceBuffer> Allocate(DeviceAllocator* allocator,
                                               size_t size) {
    absl::StatusOr<size_t> bytes =
        memory_internal::ByteSize(size, sizeof(T), "DeviceBuffer");
    if (!bytes.ok()) return bytes.status();
    absl::StatusOr<memory_internal::PooledBlock> block =
        memory_internal::PooledBlock::Allocate(allocator->cache(), *bytes);
    if (!block.ok()) return block.status();
    return DeviceBuffer(std::move(*block), size, allocator->device());
  }

  T* data() const { return static_cast<T*>(block_.get()); }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }
  int device() const { return device_; }

  // Queues host[0, n) -> data()[0, n) on `stream` (which must be on this
  // buffer's device); INVALID_ARGUMENT when n > size().
  absl::Status CopyFromHost(absl::Span<const T> host,
                            const CudaStream& stream) {
    return memory_internal::CopyAsync(
        data(), host.data(), host.size(), size_, sizeof(T),
        cudaMemcpyHostToDevice, device_, stream, "DeviceBuffer::CopyFromHost");
  }

  // Queues data()[0, n) -> host[0, n) on `stream`; the host memory holds
  // the result only after the stream is synchronized.
  absl::Status CopyToHost(absl::Span<T> host, const CudaStream& stream) const {
    return memory_internal::CopyAsync(
        host.data(), data(), host.size(), size_, sizeof(T),
        cudaMemcpyDeviceToHost, device_, stream, "DeviceBuffer::CopyToHost");
  }

 private:
  DeviceBuffer(memory_internal::PooledBlock block, size_t size, int device)
      : block_(std::move(block)), size_(size), device_(device) {}

  memory_internal::PooledBlock block_;
  size_t size_ = 0;
  int device_ = -1;
};

// `size()` elements of T in page-locked host memory from a PinnedHostPool,
// returned to it on destruction. Write it on the host, then copy it with
// DeviceBuffer::CopyFromHost (truly asynchronous from pinned memory); do not
// touch it again until the stream has run the copy. Move-only; one owner.
template <typename T>
class PinnedBuffer {
  static_assert(std::is_trivially_copyable<T>::value,
                "PinnedBuffer holds raw bytes copied with cudaMemcpy");

 public:
  PinnedBuffer() = default;

  static absl::StatusOr<PinnedBuffer> Allocate(PinnedHostPool* pool,
                                               size_t size) {
    absl::StatusOr<size_t> bytes =
        memory_internal::ByteSize(size, sizeof(T), "PinnedBuffer");
    if (!bytes.ok()) return bytes.status();
    absl::StatusOr<memory_internal::PooledBlock> block =
        memory_internal::PooledBlock::Allocate(pool->cache(), *bytes);
    if (!block.ok()) return block.status();
    return PinnedBuffer(std::move(*block), size);
  }

  T* data() const { return static_cast<T*>(block_.get()); }
  size_t size() const { return size_; }
  absl::Span<T> span() const { return absl::Span<T>(data(), size_); }

 private:
  PinnedBuffer(memory_internal::PooledBlock block, size_t size)
      : block_(std::move(block)), size_(size) {}

  memory_internal::PooledBlock block_;
  size_t size_ = 0;
};

}  // namespace cohort

#endif  // COHORT_KERNELS_CUDA_MEMORY_H_

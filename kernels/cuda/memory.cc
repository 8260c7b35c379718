#include "kernels/cuda/memory.h"

#include <cuda_runtime_api.h>

#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"

namespace cohort {
namespace {

std::string DeviceName(int device) { return absl::StrCat("cuda:", device); }

// OK when `device` is a visible GPU; otherwise why not, naming it.
absl::Status CheckDevice(int device) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky: keep it out of later launch checks
    return absl::UnavailableError(absl::StrCat(
        DeviceName(device), ": no CUDA device: ", cudaGetErrorString(e)));
  }
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(absl::StrCat(DeviceName(device),
                                                   " does not exist; ", count,
                                                   " CUDA device(s) visible"));
  }
  return absl::OkStatus();
}

// A failed allocation leaves its error as the thread's "last error"; clear
// it, or the next LaunchStatus() would blame an innocent kernel for it.
absl::Status AllocationStatus(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) cudaGetLastError();
  return CudaStatus(e, what);
}

class CudaMallocBackend : public AllocatorBackend {
 public:
  explicit CudaMallocBackend(int device) : device_(device) {}

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* p = nullptr;
    RETURN_IF_ERROR(OnDevice(device_, [&] {
      return AllocationStatus(
          cudaMalloc(&p, bytes),
          absl::StrCat("cudaMalloc(", bytes, ") on ", DeviceName(device_)));
    }));
    return p;
  }

  void Free(void* p) override {
    const absl::Status status = OnDevice(device_, [&] {
      return CudaStatus(cudaFree(p),
                        absl::StrCat("cudaFree on ", DeviceName(device_)));
    });
    if (!status.ok()) LOG(ERROR) << status;
  }

 private:
  const int device_;
};

class CudaHostAllocBackend : public AllocatorBackend {
 public:
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* p = nullptr;
    RETURN_IF_ERROR(
        AllocationStatus(cudaHostAlloc(&p, bytes, cudaHostAllocPortable),
                         absl::StrCat("cudaHostAlloc(", bytes, ")")));
    return p;
  }

  void Free(void* p) override {
    const absl::Status status = CudaStatus(cudaFreeHost(p), "cudaFreeHost");
    if (!status.ok()) LOG(ERROR) << status;
  }
};

}  // namespace

// ---- CudaStream ----

absl::StatusOr<CudaStream> CudaStream::Create(int device) {
  RETURN_IF_ERROR(CheckDevice(device));
  cudaStream_t stream = nullptr;
  RETURN_IF_ERROR(OnDevice(device, [&] {
    return CudaStatus(
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
        absl::StrCat("creating a stream on ", DeviceName(device)));
  }));
  return CudaStream(device, stream);
}

CudaStream::CudaStream(CudaStream&& other) noexcept {
  *this = std::move(other);
}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    Destroy();
    device_ = std::exchange(other.device_, -1);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

CudaStream::~CudaStream() { Destroy(); }

void CudaStream::Destroy() {
  if (stream_ == nullptr) return;
  // Queued work still completes; the runtime frees the stream after it.
  const absl::Status status =
      CudaStatus(cudaStreamDestroy(stream_),
                 absl::StrCat("destroying a stream on ", DeviceName(device_)));
  if (!status.ok()) LOG(ERROR) << status;
  stream_ = nullptr;
}

absl::Status CudaStream::Synchronize() const {
  if (stream_ == nullptr) {
    return absl::FailedPreconditionError("Synchronize on a moved-from stream");
  }
  return CudaStatus(
      cudaStreamSynchronize(stream_),
      absl::StrCat("synchronizing a stream on ", DeviceName(device_)));
}

// ---- DeviceAllocator and PinnedHostPool ----

DeviceAllocator::DeviceAllocator(int device)
    : device_(device),
      cache_(std::make_unique<CudaMallocBackend>(device),
             absl::StrCat(DeviceName(device), " device memory")) {}

absl::StatusOr<std::unique_ptr<DeviceAllocator>> DeviceAllocator::Create(
    int device) {
  RETURN_IF_ERROR(CheckDevice(device));
  return std::unique_ptr<DeviceAllocator>(new DeviceAllocator(device));
}

PinnedHostPool::PinnedHostPool()
    : cache_(std::make_unique<CudaHostAllocBackend>(), "pinned host memory") {}

absl::StatusOr<std::unique_ptr<PinnedHostPool>> PinnedHostPool::Create() {
  // Pinning needs the driver; say so now rather than at the first Allocate.
  RETURN_IF_ERROR(CheckDevice(0));
  return std::unique_ptr<PinnedHostPool>(new PinnedHostPool());
}

// ---- memory_internal ----

namespace memory_internal {

absl::StatusOr<PooledBlock> PooledBlock::Allocate(CachingAllocator* cache,
                                                  size_t bytes) {
  ASSIGN_OR_RETURN(void* p, cache->Allocate(bytes));
  return PooledBlock(cache, p);
}

PooledBlock& PooledBlock::operator=(PooledBlock&& other) noexcept {
  if (this != &other) {
    Release();
    cache_ = std::exchange(other.cache_, nullptr);
    p_ = std::exchange(other.p_, nullptr);
  }
  return *this;
}

void PooledBlock::Release() {
  if (p_ == nullptr) return;
  // Only a bug (a block freed behind this owner's back) can fail here.
  const absl::Status status = cache_->Free(p_);
  if (!status.ok()) LOG(ERROR) << status;
  p_ = nullptr;
  cache_ = nullptr;
}

absl::StatusOr<size_t> ByteSize(size_t count, size_t element_size,
                                const char* what) {
  if (element_size != 0 &&
      count > std::numeric_limits<size_t>::max() / element_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", count, " elements of ", element_size,
                     " bytes overflow size_t"));
  }
  return count * element_size;
}

absl::Status CopyAsync(void* dst, const void* src, size_t count,
                       size_t capacity, size_t element_size,
                       cudaMemcpyKind kind, int device,
                       const CudaStream& stream, const char* what) {
  if (count > capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", count, " elements do not fit a buffer of ",
                     capacity, " on ", DeviceName(device)));
  }
  if (stream.get() == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the stream was moved from"));
  }
  if (stream.device() != device) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the stream is on ", DeviceName(stream.device()),
                     " but the buffer is on ", DeviceName(device)));
  }
  if (count == 0) return absl::OkStatus();
  return CudaStatus(
      cudaMemcpyAsync(dst, src, count * element_size, kind, stream.get()),
      absl::StrCat(what, " of ", count * element_size, " bytes on ",
                   DeviceName(device)));
}

}  // namespace memory_internal
}  // namespace cohort

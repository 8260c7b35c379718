#include "kernels/cuda/memory.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device.h"

namespace cohort {
namespace {

#define SKIP_WITHOUT_DEVICE()                               \
  do {                                                      \
    const CudaDevices devices = FindCudaDevices();          \
    if (devices.names.empty()) {                            \
      GTEST_SKIP() << "no CUDA device: " << devices.reason; \
    }                                                       \
  } while (false)

// Deterministic, non-repeating contents so a misplaced byte shows.
std::vector<float> Ramp(size_t n, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + 0.25f * static_cast<float>(i);
  return v;
}

// Runs without a GPU too: a device nobody has is an error that names it.
TEST(CudaMemory, MissingDeviceIsAnErrorNamingIt) {
  absl::StatusOr<std::unique_ptr<DeviceAllocator>> alloc =
      DeviceAllocator::Create(1000);
  ASSERT_FALSE(alloc.ok());
  EXPECT_NE(alloc.status().message().find("cuda:1000"), absl::string_view::npos)
      << alloc.status();
  absl::StatusOr<CudaStream> stream = CudaStream::Create(-1);
  ASSERT_FALSE(stream.ok());
  EXPECT_NE(stream.status().message().find("cuda:-1"), absl::string_view::npos)
      << stream.status();
}

TEST(CudaMemory, RoundTripHostDeviceHost) {
  SKIP_WITHOUT_DEVICE();
  auto alloc = DeviceAllocator::Create(0);
  ASSERT_TRUE(alloc.ok()) << alloc.status();
  auto stream = CudaStream::Create(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  // One small (512-byte rounding) and one large (2 MiB rounding) buffer.
  for (size_t n : {size_t{1000}, size_t{1000003}}) {
    const std::vector<float> in = Ramp(n, 3.0f);
    auto buf = DeviceBuffer<float>::Allocate(alloc->get(), n);
    ASSERT_TRUE(buf.ok()) << buf.status();
    EXPECT_EQ(buf->size(), n);
    EXPECT_EQ(buf->bytes(), n * sizeof(float));
    ASSERT_TRUE(buf->CopyFromHost(in, *stream).ok());
    std::vector<float> out(n, -1.0f);
    ASSERT_TRUE(buf->CopyToHost(absl::MakeSpan(out), *stream).ok());
    ASSERT_TRUE(stream->Synchronize().ok());
    EXPECT_EQ(out, in) << "n=" << n;
  }
  EXPECT_EQ((*alloc)->stats().bytes_in_use, 0u);
}

TEST(CudaMemory, CopiesCheckSizesAndStreams) {
  SKIP_WITHOUT_DEVICE();
  auto alloc = DeviceAllocator::Create(0);
  ASSERT_TRUE(alloc.ok()) << alloc.status();
  auto stream = CudaStream::Create(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  auto buf = DeviceBuffer<int32_t>::Allocate(alloc->get(), 8);
  ASSERT_TRUE(buf.ok()) << buf.status();
  std::vector<int32_t> nine(9, 1);
  absl::Status too_many = buf->CopyFromHost(nine, *stream);
  EXPECT_TRUE(absl::IsInvalidArgument(too_many)) << too_many;
  EXPECT_NE(too_many.message().find("9 elements"), absl::string_view::npos);
  EXPECT_TRUE(
      absl::IsInvalidArgument(buf->CopyToHost(absl::MakeSpan(nine), *stream)));
  // A prefix is fine.
  std::vector<int32_t> three = {7, 8, 9}, back(3, 0);
  ASSERT_TRUE(buf->CopyFromHost(three, *stream).ok());
  ASSERT_TRUE(buf->CopyToHost(absl::MakeSpan(back), *stream).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  EXPECT_EQ(back, three);
  CudaStream moved = std::move(*stream);
  EXPECT_TRUE(absl::IsInvalidArgument(buf->CopyFromHost(three, *stream)));
  EXPECT_TRUE(moved.Synchronize().ok());
}

// After the first step the allocator must stop calling cudaMalloc.
TEST(CudaMemory, SteadyStateStopsCallingCudaMalloc) {
  SKIP_WITHOUT_DEVICE();
  auto alloc = DeviceAllocator::Create(0);
  ASSERT_TRUE(alloc.ok()) << alloc.status();
  auto stream = CudaStream::Create(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const std::vector<float> host = Ramp(300000, 1.0f);
  int64_t after_first_step = -1;
  for (int step = 0; step < 20; ++step) {
    std::vector<DeviceBuffer<float>> buffers;
    for (size_t n : {size_t{10}, size_t{4096}, size_t{300000}}) {
      auto buf = DeviceBuffer<float>::Allocate(alloc->get(), n);
      ASSERT_TRUE(buf.ok()) << buf.status();
      ASSERT_TRUE(
          buf->CopyFromHost(absl::MakeConstSpan(host.data(), n), *stream).ok());
      buffers.push_back(std::move(*buf));
    }
    // One stream for all work, so freeing without a sync is safe; sync
    // anyway so that `host` outlives the copies.
    ASSERT_TRUE(stream->Synchronize().ok());
    if (step == 0) after_first_step = (*alloc)->stats().backend_allocations;
  }
  const AllocatorStats s = (*alloc)->stats();
  EXPECT_EQ(after_first_step, 3);
  EXPECT_EQ(s.backend_allocations, 3);
  EXPECT_EQ(s.cache_hits, 19 * 3);
  EXPECT_EQ(s.bytes_in_use, 0u);
  (*alloc)->EmptyCache();
  EXPECT_EQ((*alloc)->stats().backend_frees, 3);
}

// cudaMalloc failing must come back as RESOURCE_EXHAUSTED and must not
// leave its error behind for the next kernel launch check.
TEST(CudaMemory, ImpossibleAllocationIsResourceExhausted) {
  SKIP_WITHOUT_DEVICE();
  auto alloc = DeviceAllocator::Create(0);
  ASSERT_TRUE(alloc.ok()) << alloc.status();
  auto buf = DeviceBuffer<char>::Allocate(alloc->get(), size_t{1} << 52);
  ASSERT_TRUE(absl::IsResourceExhausted(buf.status())) << buf.status();
  EXPECT_NE(buf.status().message().find("cuda:0 device memory"),
            absl::string_view::npos)
      << buf.status();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ((*alloc)->stats().oom_retries, 1);
}

// Pinned staging: blocks really are page-locked, and an upload on one
// stream and a download on another, both queued before either is waited
// for, deliver the right bytes.
TEST(CudaMemory, PinnedCopiesOverlapOnTwoStreams) {
  SKIP_WITHOUT_DEVICE();
  auto pool = PinnedHostPool::Create();
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto alloc = DeviceAllocator::Create(0);
  ASSERT_TRUE(alloc.ok()) << alloc.status();
  auto upload = CudaStream::Create(0);
  auto download = CudaStream::Create(0);
  ASSERT_TRUE(upload.ok() && download.ok());
  constexpr size_t kN = 4 << 20;  // 16 MiB of floats: long enough to overlap
  auto staged_in = PinnedBuffer<float>::Allocate(pool->get(), kN);
  auto staged_out = PinnedBuffer<float>::Allocate(pool->get(), kN);
  ASSERT_TRUE(staged_in.ok() && staged_out.ok());
  cudaPointerAttributes attributes;
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, staged_in->data()),
            cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);  // pinned, not pageable

  const std::vector<float> a = Ramp(kN, 1.0f), b = Ramp(kN, -7.0f);
  std::copy(a.begin(), a.end(), staged_in->data());
  auto dev_a = DeviceBuffer<float>::Allocate(alloc->get(), kN);
  auto dev_b = DeviceBuffer<float>::Allocate(alloc->get(), kN);
  ASSERT_TRUE(dev_a.ok() && dev_b.ok());
  ASSERT_TRUE(dev_b->CopyFromHost(b, *download).ok());
  ASSERT_TRUE(download->Synchronize().ok());

  ASSERT_TRUE(dev_a->CopyFromHost(staged_in->span(), *upload).ok());
  ASSERT_TRUE(dev_b->CopyToHost(staged_out->span(), *download).ok());
  ASSERT_TRUE(upload->Synchronize().ok());
  ASSERT_TRUE(download->Synchronize().ok());
  EXPECT_TRUE(std::equal(b.begin(), b.end(), staged_out->data()));

  // And back through pinned memory: dev_a holds `a`.
  ASSERT_TRUE(dev_a->CopyToHost(staged_out->span(), *upload).ok());
  ASSERT_TRUE(upload->Synchronize().ok());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), staged_out->data()));
  EXPECT_EQ((*pool)->stats().blocks_in_use, 2u);
  EXPECT_EQ((*pool)->stats().backend_allocations, 2);
}

TEST(CudaMemory, PinnedPoolReusesBlocks) {
  SKIP_WITHOUT_DEVICE();
  auto pool = PinnedHostPool::Create();
  ASSERT_TRUE(pool.ok()) << pool.status();
  for (int i = 0; i < 10; ++i) {
    auto buf = PinnedBuffer<double>::Allocate(pool->get(), 50000);
    ASSERT_TRUE(buf.ok()) << buf.status();
    buf->data()[49999] = i;  // writable host memory
  }
  EXPECT_EQ((*pool)->stats().backend_allocations, 1);
  EXPECT_EQ((*pool)->stats().cache_hits, 9);
}

}  // namespace
}  // namespace cohort

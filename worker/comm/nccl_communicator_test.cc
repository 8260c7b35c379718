// Runs where CUDA devices exist; skips with the reason elsewhere. Every
// test builds its communicators through a real KV store (InMemoryKv) as
// the worker does through the coordinator.
#include "worker/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

int DevicesOrSkip() {
  const CudaDevices d = FindCudaDevices();
  return static_cast<int>(d.names.size());
}

#define REQUIRE_GPUS(n)                                            \
  do {                                                             \
    const CudaDevices d = FindCudaDevices();                       \
    if (static_cast<int>(d.names.size()) < (n)) {                  \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s), found " \
                   << d.names.size() << ": "                       \
                   << (d.reason.empty() ? "too few" : d.reason);   \
    }                                                              \
  } while (0)

// One buffer per device, element k of device i holding (i + 1) * (k + 1).
struct Buffers {
  std::vector<float*> device;
  std::vector<cudaStream_t> streams;
  int64_t count = 0;

  Buffers(const std::vector<int>& devices, int64_t n, int first_rank)
      : count(n) {
    for (size_t i = 0; i < devices.size(); ++i) {
      cudaSetDevice(devices[i]);
      float* p = nullptr;
      EXPECT_EQ(cudaMalloc(&p, n * sizeof(float)), cudaSuccess);
      std::vector<float> host(n);
      for (int64_t k = 0; k < n; ++k) host[k] = (first_rank + i + 1) * (k + 1);
      cudaMemcpy(p, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
      cudaStream_t s;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      device.push_back(p);
      streams.push_back(s);
    }
  }
  ~Buffers() {
    for (size_t i = 0; i < device.size(); ++i) {
      cudaFree(device[i]);
      cudaStreamDestroy(streams[i]);
    }
  }
  std::vector<float> Read(size_t i) const {
    std::vector<float> host(count);
    cudaMemcpy(host.data(), device[i], count * sizeof(float),
               cudaMemcpyDeviceToHost);
    return host;
  }
};

void ExpectAllReduceOverLocalGpus(NcclOptions::Algorithm algorithm) {
  const int n = DevicesOrSkip();
  NcclTopology t;
  for (int i = 0; i < n; ++i) t.devices.push_back(i);
  t.world_ranks = n;
  NcclOptions o;
  o.algorithm = algorithm;
  o.timeout = absl::Seconds(20);
  InMemoryKv kv;
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> c =
      NcclCommunicator::Create(kv, t, o);
  ASSERT_TRUE(c.ok()) << c.status();
  const int64_t count = (1 << 20) + 3;
  Buffers b(t.devices, count, 0);
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE((*c)->AllReduceSum(b.device, count, b.streams).ok());
  }
  ASSERT_TRUE((*c)->Wait().ok());
  // Three sums over n GPUs: n^2 (n+1)/2 (k+1), then that times n twice more.
  const double ranks_sum = n * (n + 1) / 2.0;
  for (int i = 0; i < n; ++i) {
    const std::vector<float> got = b.Read(i);
    for (int64_t k : {int64_t{0}, int64_t{1000}, count - 1}) {
      const double want = ranks_sum * n * n * (k + 1);
      EXPECT_NEAR(got[k], want, 1e-5 * want) << "GPU " << i << " element " << k;
    }
  }
}

TEST(NcclCommunicator, FlatAllReduceOverEveryLocalGpu) {
  REQUIRE_GPUS(1);
  ExpectAllReduceOverLocalGpus(NcclOptions::Algorithm::kFlat);
}

TEST(NcclCommunicator, HierarchicalAllReduceOverEveryLocalGpu) {
  REQUIRE_GPUS(1);
  ExpectAllReduceOverLocalGpus(NcclOptions::Algorithm::kHierarchical);
}

// Two "nodes" (threads, as two processes would be) of one GPU each,
// bootstrapped through one KV store.
TEST(NcclCommunicator, TwoNodesBothAlgorithms) {
  REQUIRE_GPUS(2);
  for (auto algorithm :
       {NcclOptions::Algorithm::kFlat, NcclOptions::Algorithm::kHierarchical}) {
    InMemoryKv kv;
    std::vector<std::vector<float>> got(2);
    std::vector<std::thread> nodes;
    for (int node = 0; node < 2; ++node) {
      nodes.emplace_back([&, node] {
        NcclTopology t;
        t.node_rank = node;
        t.num_nodes = 2;
        t.first_rank = node;
        t.world_ranks = 2;
        t.devices = {node};
        NcclOptions o;
        o.algorithm = algorithm;
        o.key_prefix = algorithm == NcclOptions::Algorithm::kFlat ? "f/" : "h/";
        auto c = NcclCommunicator::Create(kv, t, o);
        ASSERT_TRUE(c.ok()) << c.status();
        Buffers b(t.devices, 4096, node);
        ASSERT_TRUE((*c)->AllReduceSum(b.device, 4096, b.streams).ok());
        ASSERT_TRUE((*c)->Wait().ok());
        got[node] = b.Read(0);
      });
    }
    for (std::thread& t : nodes) t.join();
    for (int node = 0; node < 2; ++node) {
      ASSERT_EQ(got[node].size(), 4096u);
      EXPECT_FLOAT_EQ(got[node][10], 3.0f * 11);  // (1 + 2) * (k + 1)
    }
  }
}

// A peer that never joins: creation fails within the timeout, naming it.
TEST(NcclCommunicator, MissingPeerFailsCreationWithinTheTimeout) {
  REQUIRE_GPUS(1);
  NcclTopology t;
  t.node_rank = 1;
  t.num_nodes = 2;
  t.first_rank = 1;
  t.world_ranks = 2;
  t.devices = {0};
  NcclOptions o;
  o.timeout = absl::Seconds(2);
  InMemoryKv kv;  // rank 0 never publishes the id
  const absl::Time start = absl::Now();
  auto c = NcclCommunicator::Create(kv, t, o);
  EXPECT_FALSE(c.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(NcclCommunicator, AbortFailsLaterCallsWithTheReason) {
  REQUIRE_GPUS(1);
  NcclTopology t;
  t.devices = {0};
  InMemoryKv kv;
  auto c = NcclCommunicator::Create(kv, t, NcclOptions());
  ASSERT_TRUE(c.ok()) << c.status();
  (*c)->Abort(absl::AbortedError("generation 3 began"));
  Buffers b(t.devices, 16, 0);
  absl::Status s = (*c)->AllReduceSum(b.device, 16, b.streams);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(s.message(), HasSubstr("generation 3"));
  EXPECT_EQ((*c)->Wait().code(), absl::StatusCode::kAborted);
}

TEST(NcclAlgorithm, ParsesNamesAndRefusesOthers) {
  EXPECT_EQ(*ParseNcclAlgorithm("flat"), NcclOptions::Algorithm::kFlat);
  EXPECT_EQ(*ParseNcclAlgorithm("hierarchical"),
            NcclOptions::Algorithm::kHierarchical);
  absl::StatusOr<NcclOptions::Algorithm> bad = ParseNcclAlgorithm("ring");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("\"ring\""));
}

}  // namespace
}  // namespace cohort

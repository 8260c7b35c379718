// Runs where CUDA devices exist; skips with the reason elsewhere. Every
// test builds its communicators through a real KV store (InMemoryKv) as
// the worker does through the coordinator.
#include "worker/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/require_gpus.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

int DevicesOrSkip() {
  const CudaDevices d = FindCudaDevices();
  return static_cast<int>(d.names.size());
}

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
      // A pageable copy may still be landing when cudaMemcpy returns.
      cudaDeviceSynchronize();
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

// Holds a stream for `ms` milliseconds (a host function on it), as a long
// kernel would: whatever the stream runs next starts after that.
void CUDART_CB SleepOnStream(void* ms) {
  std::this_thread::sleep_for(
      std::chrono::milliseconds(reinterpret_cast<intptr_t>(ms)));
}

void Delay(cudaStream_t s, int ms) {
  ASSERT_EQ(cudaLaunchHostFunc(s, SleepOnStream,
                               reinterpret_cast<void*>(intptr_t{ms})),
            cudaSuccess);
}

// What the GPU trainer does: per GPU, a compute stream "produces" the
// gradient bucket by bucket (last bucket first, each after a delay) and
// records an event after each; a communication stream waits for each event
// and all-reduces that bucket; the compute stream waits for the last
// all-reduce and reads the result. One Wait at the end. If a bucket's
// all-reduce did not wait for its event, it would sum zeros.
void ExpectBucketsAfterComputeEvents(NcclOptions::Algorithm algorithm) {
  const int n = DevicesOrSkip();
  NcclTopology t;
  for (int i = 0; i < n; ++i) t.devices.push_back(i);
  t.world_ranks = n;
  NcclOptions o;
  o.algorithm = algorithm;
  o.timeout = absl::Seconds(20);
  InMemoryKv kv;
  auto c = NcclCommunicator::Create(kv, t, o);
  ASSERT_TRUE(c.ok()) << c.status();
  // Bucket b is [edges[b], edges[b + 1]); backward order is b = 2, 1, 0.
  const std::vector<int64_t> edges = {0, 777, 777 + 4096, 777 + 4096 + 300001};
  const int64_t count = edges.back();
  const int buckets = static_cast<int>(edges.size()) - 1;
  struct PerGpu {
    cudaStream_t compute = nullptr, comm = nullptr;
    std::vector<cudaEvent_t> ready;
    cudaEvent_t reduced = nullptr;
    float* grads = nullptr;
    float* host = nullptr;    // pinned: the copies stay asynchronous
    float* result = nullptr;  // pinned
  };
  std::vector<PerGpu> g(n);
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(cudaSetDevice(i), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&g[i].compute, cudaStreamNonBlocking),
              cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&g[i].comm, cudaStreamNonBlocking),
              cudaSuccess);
    g[i].ready.resize(buckets);
    for (cudaEvent_t& e : g[i].ready) {
      ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                cudaSuccess);
    }
    ASSERT_EQ(cudaEventCreateWithFlags(&g[i].reduced, cudaEventDisableTiming),
              cudaSuccess);
    ASSERT_EQ(cudaMalloc(&g[i].grads, count * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemset(g[i].grads, 0, count * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMallocHost(&g[i].host, count * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMallocHost(&g[i].result, count * sizeof(float)), cudaSuccess);
    for (int64_t k = 0; k < count; ++k) g[i].host[k] = (i + 1) * (k % 1000 + 1);
    for (int b = buckets - 1; b >= 0; --b) {
      Delay(g[i].compute, 30);
      const int64_t size = edges[b + 1] - edges[b];
      ASSERT_EQ(cudaMemcpyAsync(g[i].grads + edges[b], g[i].host + edges[b],
                                size * sizeof(float), cudaMemcpyHostToDevice,
                                g[i].compute),
                cudaSuccess);
      ASSERT_EQ(cudaEventRecord(g[i].ready[b], g[i].compute), cudaSuccess);
    }
  }
  // The host issues every bucket at once; only the events hold them back.
  for (int b = buckets - 1; b >= 0; --b) {
    std::vector<float*> buffers;
    std::vector<cudaStream_t> streams;
    for (PerGpu& x : g) {
      ASSERT_EQ(cudaStreamWaitEvent(x.comm, x.ready[b], 0), cudaSuccess);
      buffers.push_back(x.grads + edges[b]);
      streams.push_back(x.comm);
    }
    ASSERT_TRUE(
        (*c)->AllReduceSum(buffers, edges[b + 1] - edges[b], streams).ok());
  }
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(cudaSetDevice(i), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(g[i].reduced, g[i].comm), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent(g[i].compute, g[i].reduced, 0), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(g[i].result, g[i].grads, count * sizeof(float),
                              cudaMemcpyDeviceToHost, g[i].compute),
              cudaSuccess);
  }
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(cudaStreamSynchronize(g[i].compute), cudaSuccess);
  }
  ASSERT_TRUE((*c)->Wait().ok());
  const float ranks_sum = n * (n + 1) / 2.0f;
  for (int i = 0; i < n; ++i) {
    for (int64_t k = 0; k < count; ++k) {
      ASSERT_EQ(g[i].result[k], ranks_sum * (k % 1000 + 1))
          << "GPU " << i << " element " << k;
    }
  }
  for (PerGpu& x : g) {
    for (cudaEvent_t e : x.ready) cudaEventDestroy(e);
    cudaEventDestroy(x.reduced);
    cudaStreamDestroy(x.compute);
    cudaStreamDestroy(x.comm);
    cudaFree(x.grads);
    cudaFreeHost(x.host);
    cudaFreeHost(x.result);
  }
}

TEST(NcclCommunicator, FlatBucketsWaitForTheirComputeEvents) {
  REQUIRE_GPUS(1);
  ExpectBucketsAfterComputeEvents(NcclOptions::Algorithm::kFlat);
}

TEST(NcclCommunicator, HierarchicalBucketsWaitForTheirComputeEvents) {
  REQUIRE_GPUS(1);
  ExpectBucketsAfterComputeEvents(NcclOptions::Algorithm::kHierarchical);
}

// Wait covers every collective enqueued, not only the last: the first one
// runs late on other streams. Read back through the legacy stream, which
// does not wait for non-blocking streams.
TEST(NcclCommunicator, WaitCoversCollectivesOnDifferentStreams) {
  REQUIRE_GPUS(1);
  NcclTopology t;
  t.devices = {0};
  InMemoryKv kv;
  auto c = NcclCommunicator::Create(kv, t, NcclOptions());
  ASSERT_TRUE(c.ok()) << c.status();
  Buffers late(t.devices, 1 << 16, 0), early(t.devices, 16, 0);
  Delay(late.streams[0], 300);
  ASSERT_TRUE((*c)->AllReduceSum(late.device, late.count, late.streams).ok());
  ASSERT_TRUE(
      (*c)->AllReduceSum(early.device, early.count, early.streams).ok());
  ASSERT_TRUE((*c)->Wait().ok());
  ASSERT_EQ(cudaStreamQuery(late.streams[0]), cudaSuccess)
      << "Wait returned before the first collective's stream was done";
  EXPECT_FLOAT_EQ(late.Read(0)[5], 6.0f);  // one rank: the values stay
}

// The watchdog times each collective from its own enqueue: a collective
// enqueued long after an earlier one finished, with no Wait in between (a
// trainer that orders on the GPU), is not mistaken for a stalled one.
TEST(NcclCommunicator, WatchdogTimesEachCollectiveFromItsEnqueue) {
  REQUIRE_GPUS(1);
  NcclTopology t;
  t.devices = {0};
  NcclOptions o;
  o.timeout = absl::Seconds(1);
  InMemoryKv kv;
  auto c = NcclCommunicator::Create(kv, t, o);
  ASSERT_TRUE(c.ok()) << c.status();
  Buffers b(t.devices, 1024, 0);
  ASSERT_TRUE((*c)->AllReduceSum(b.device, b.count, b.streams).ok());
  absl::SleepFor(absl::Milliseconds(1500));
  Delay(b.streams[0], 400);
  ASSERT_TRUE((*c)->AllReduceSum(b.device, b.count, b.streams).ok());
  absl::SleepFor(absl::Milliseconds(200));  // the watchdog looks meanwhile
  const absl::Status s = (*c)->Wait();
  EXPECT_TRUE(s.ok()) << s;
}

// A peer that never joins a collective: the collective fails within the
// timeout (enqueuing, if NCCL needs the peer to connect, or in Wait once
// the watchdog aborts) instead of hanging.
TEST(NcclCommunicator, StalledPeerTimesOutTheCollective) {
  REQUIRE_GPUS(2);
  InMemoryKv kv;
  absl::Status failed;
  absl::Duration took;
  absl::Notification done;
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
      o.timeout = absl::Seconds(2);
      auto c = NcclCommunicator::Create(kv, t, o);
      if (node == 1) {  // joins, then never all-reduces
        if (c.ok()) done.WaitForNotification();
        if (c.ok()) (*c)->Abort(absl::AbortedError("test over"));
        return;
      }
      if (!c.ok()) {
        failed = c.status();
        done.Notify();
        return;
      }
      Buffers b(t.devices, 4096, node);
      const absl::Time start = absl::Now();
      failed = (*c)->AllReduceSum(b.device, 4096, b.streams);
      if (failed.ok()) failed = (*c)->Wait();
      took = absl::Now() - start;
      done.Notify();
    });
  }
  for (std::thread& t : nodes) t.join();
  EXPECT_EQ(failed.code(), absl::StatusCode::kDeadlineExceeded) << failed;
  EXPECT_THAT(failed.message(), HasSubstr("a peer is dead or stalled"));
  EXPECT_LT(took, absl::Seconds(10));
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

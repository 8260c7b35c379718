#include "worker/comm/bucket_reducer.h"

#include <atomic>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "worker/comm/test_ranks.h"

namespace cohort {
namespace {

// Records every all-reduce and checks none starts before its data is final.
class RecordingComm : public Communicator {
 public:
  explicit RecordingComm(const float* base) : base_(base) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  absl::Status AllReduceSum(float* data, int64_t count) override {
    int64_t start = data - base_;
    absl::MutexLock lock(&mu_);
    calls_.push_back({start, count});
    premature_ += start < ready_.load();
    return absl::OkStatus();
  }
  void SetReady(int64_t offset) { ready_.store(offset); }
  std::vector<std::pair<int64_t, int64_t>> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  int premature() {
    absl::MutexLock lock(&mu_);
    return premature_;
  }

 private:
  const float* const base_;
  std::atomic<int64_t> ready_{0};
  absl::Mutex mu_;
  std::vector<std::pair<int64_t, int64_t>> calls_ ABSL_GUARDED_BY(mu_);
  int premature_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(BucketReducer, ReducesBucketsInReverseOrderOnlyOnceReady) {
  const int64_t count = 1000;
  std::vector<float> grads(count, 2.0f);
  RecordingComm comm(grads.data());
  BucketReducer reducer(&comm, /*bucket_bytes=*/4 * 300 + 3);  // 300 floats
  EXPECT_EQ(reducer.num_buckets(), 0);
  comm.SetReady(count);
  reducer.BeginStep(grads.data(), count, 0.5f);
  EXPECT_EQ(reducer.num_buckets(), 4);
  for (int64_t offset : {950, 720, 690, 333, 100}) {
    comm.SetReady(offset);
    reducer.MarkReadyFrom(offset);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  comm.SetReady(0);
  ASSERT_TRUE(reducer.Finish().ok());
  using Call = std::pair<int64_t, int64_t>;
  EXPECT_EQ(comm.calls(),
            (std::vector<Call>{{700, 300}, {400, 300}, {100, 300}, {0, 100}}));
  EXPECT_EQ(comm.premature(), 0);
  for (float g : grads) ASSERT_EQ(g, 1.0f);
  BucketReducer::Stats stats = reducer.TakeStats();
  EXPECT_EQ(stats.bytes, count * 4);
  EXPECT_EQ(reducer.TakeStats().bytes, 0);
}

TEST(BucketReducer, EmptyBufferFinishesAtOnce) {
  float unused = 0;
  RecordingComm comm(&unused);
  BucketReducer reducer(&comm, 1024);
  reducer.BeginStep(&unused, 0, 0.5f);
  EXPECT_TRUE(reducer.Finish().ok());
  EXPECT_TRUE(comm.calls().empty());
}

float Input(int rank, int64_t i) {
  return static_cast<float>((rank + 1) * (1 + i % 5));
}

// Every rank's bucketed, scaled result must equal one big all-reduce of the
// same input, scaled once, bit for bit (the sums are exact integers).
void ExpectMatchesOneBigAllReduce(int size, const std::string& algorithm,
                                  int64_t count, int64_t bucket_bytes) {
  SCOPED_TRACE(algorithm + " size " + std::to_string(size));
  GlooOptions options;
  options.algorithm = algorithm;
  options.timeout = absl::Seconds(20);
  auto group = LocalGroup::Connect(size, options);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<int64_t> mismatches(size, -1);
  (*group)->Run([&](int rank) {
    Communicator& comm = (*group)->comm(rank);
    const float scale = 1.0f / size;
    std::vector<float> expected(count);
    for (int64_t i = 0; i < count; ++i) expected[i] = Input(rank, i);
    ASSERT_TRUE(comm.AllReduceSum(expected.data(), count).ok());
    for (float& e : expected) e *= scale;
    BucketReducer reducer(&comm, bucket_bytes);
    std::vector<float> grads(count);
    mismatches[rank] = 0;
    for (int step = 0; step < 3; ++step) {
      for (int64_t i = 0; i < count; ++i) grads[i] = Input(rank, i);
      reducer.BeginStep(grads.data(), count, scale);
      // Backward finishes parameters from the end, in uneven pieces.
      for (int64_t offset = count; offset > 0; offset -= count / 7 + 13) {
        reducer.MarkReadyFrom(offset);
      }
      absl::Status status = reducer.Finish();
      ASSERT_TRUE(status.ok()) << status;
      for (int64_t i = 0; i < count; ++i) {
        mismatches[rank] += grads[i] != expected[i];
      }
    }
    BucketReducer::Stats stats = reducer.TakeStats();
    EXPECT_EQ(stats.bytes, 3 * count * 4);
    EXPECT_GT(stats.comm_seconds, 0);
  });
  EXPECT_EQ(mismatches, std::vector<int64_t>(size, 0));
}

TEST(BucketReducer, MatchesOneBigAllReduceWithOddBuckets) {
  ExpectMatchesOneBigAllReduce(2, "ring_chunked", 100003, 4 * 9973 + 2);
  ExpectMatchesOneBigAllReduce(3, "ring_chunked", 100003, 4 * 9973 + 2);
  ExpectMatchesOneBigAllReduce(4, "halving_doubling", 54321, 4 * 1001);
  ExpectMatchesOneBigAllReduce(3, "bcube", 7777, 4 * 777);
}

TEST(BucketReducer, RebindsWhenEveryRankChangesItsBuffer) {
  GlooOptions options;
  options.timeout = absl::Seconds(20);
  auto group = LocalGroup::Connect(2, options);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<int> wrong(2, -1);
  (*group)->Run([&](int rank) {
    BucketReducer reducer(&(*group)->comm(rank), 4 * 100);
    wrong[rank] = 0;
    for (int64_t count : {1000, 250, 4000}) {
      std::vector<float> grads(count, rank + 1.0f);
      reducer.BeginStep(grads.data(), count, 1.0f);
      ASSERT_TRUE(reducer.Finish().ok());
      EXPECT_EQ(reducer.num_buckets(), (count + 99) / 100);
      for (float g : grads) wrong[rank] += g != 3.0f;
    }
  });
  EXPECT_EQ(wrong, std::vector<int>(2, 0));
}

TEST(BucketReducer, StalledPeerFailsTheStepWithinTheTimeout) {
  GlooOptions options;
  options.timeout = absl::Seconds(1);
  auto group = LocalGroup::Connect(2, options);
  ASSERT_TRUE(group.ok()) << group.status();
  absl::Status status;
  double seconds = 0;
  (*group)->Run([&](int rank) {
    if (rank == 1) return;  // never joins the step
    BucketReducer reducer(&(*group)->comm(0), 4 * 1000);
    std::vector<float> grads(10000, 1.0f);
    auto start = std::chrono::steady_clock::now();
    reducer.BeginStep(grads.data(), 10000, 0.5f);
    status = reducer.Finish();
    seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  });
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("rank 1"), std::string::npos) << status;
  EXPECT_LT(seconds, 3.0);
}

}  // namespace
}  // namespace cohort

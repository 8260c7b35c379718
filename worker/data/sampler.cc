#include "worker/data/sampler.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "common/logging.h"
#include "worker/data/splitmix.h"

namespace cohort {
namespace {

// std::uniform_int_distribution is implementation-defined, and every
// replica must draw the same permutation.
class PermutationRng {
 public:
  explicit PermutationRng(uint64_t seed) : rng_(seed) {}

  // Uniform in [0, n), unbiased (Lemire's multiply-and-reject).
  uint64_t Below(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(rng_.Next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = -n % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(rng_.Next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  SplitMix64 rng_;
};

}  // namespace

DistributedSampler::DistributedSampler(int64_t dataset_size,
                                       int64_t num_replicas, int64_t rank,
                                       uint64_t seed, bool shuffle,
                                       bool drop_last)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      seed_(seed),
      shuffle_(shuffle),
      drop_last_(drop_last) {
  CHECK_GE(dataset_size, 0);
  CHECK_GE(num_replicas, 1);
  CHECK(rank >= 0 && rank < num_replicas)
      << "rank " << rank << " of " << num_replicas;
  num_samples_ = drop_last ? dataset_size / num_replicas
                           : (dataset_size + num_replicas - 1) / num_replicas;
}

std::vector<int64_t> DistributedSampler::Permutation(int64_t epoch) const {
  std::vector<int64_t> order(dataset_size_);
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle_) return order;
  PermutationRng rng(
      SplitMix64Mix(seed_ ^ SplitMix64Mix(static_cast<uint64_t>(epoch))));
  for (int64_t i = dataset_size_ - 1; i > 0; --i) {
    std::swap(order[i], order[rng.Below(static_cast<uint64_t>(i) + 1)]);
  }
  return order;
}

std::vector<int64_t> DistributedSampler::Indices(int64_t epoch) const {
  return IndicesFrom(epoch, 0);
}

int64_t DistributedSampler::NumSamplesFrom(int64_t position) const {
  const int64_t rest = std::max<int64_t>(0, dataset_size_ - position);
  return drop_last_ ? rest / num_replicas_
                    : (rest + num_replicas_ - 1) / num_replicas_;
}

std::vector<int64_t> DistributedSampler::IndicesFrom(int64_t epoch,
                                                     int64_t position) const {
  CHECK_GE(position, 0);
  const int64_t n = NumSamplesFrom(position);
  std::vector<int64_t> mine;
  if (n == 0) return mine;
  const std::vector<int64_t> order = Permutation(epoch);
  mine.reserve(n);
  // Position p of the padded (or truncated) list is order[p % size]: the
  // padding repeats the permutation from its start, as many times as needed.
  for (int64_t k = 0; k < n; ++k) {
    const int64_t p = position + rank_ + k * num_replicas_;
    mine.push_back(order[p % dataset_size_]);
  }
  return mine;
}

}  // namespace cohort

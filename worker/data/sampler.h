// The distributed sampler: which samples each replica sees in each epoch.
//
// The contract is PyTorch's DistributedSampler with set_epoch built in:
// every replica computes the same permutation of [0, dataset_size) from
// (seed, epoch), pads it by repeating it from its start to a multiple of
// num_replicas (or truncates it to one, with drop_last), and takes every
// num_replicas-th index starting at its rank. Across ranks an epoch thus
// covers the data set exactly once (plus the padding). The permutation is
// computed with cohort's own generator, so it is identical on every
// platform, but it is not torch.randperm's.
//
// Ownership: a value type. Thread safety: immutable; Indices() is const and
// thread-safe.
#ifndef COHORT_WORKER_DATA_SAMPLER_H_
#define COHORT_WORKER_DATA_SAMPLER_H_

#include <cstdint>
#include <vector>

namespace cohort {

class DistributedSampler {
 public:
  // Requires dataset_size >= 0, num_replicas >= 1, 0 <= rank < num_replicas.
  DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank,
                     uint64_t seed, bool shuffle = true,
                     bool drop_last = false);

  // This replica's indices for `epoch`, num_samples() of them, in the
  // order to visit them.
  std::vector<int64_t> Indices(int64_t epoch) const;

  // Samples per replica per epoch: ceil(size / replicas), or
  // floor(size / replicas) with drop_last.
  int64_t num_samples() const { return num_samples_; }

 private:
  // The epoch's order of [0, size), the same on every replica.
  std::vector<int64_t> Permutation(int64_t epoch) const;

  int64_t dataset_size_;
  int64_t num_replicas_;
  int64_t rank_;
  uint64_t seed_;
  bool shuffle_;
  bool drop_last_;
  int64_t num_samples_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_SAMPLER_H_

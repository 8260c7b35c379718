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
// Elastic jobs change their replica count mid-epoch. The epoch's progress
// is then a position in its order: after s steps of batch b over R
// replicas, positions [0, s * b * R) are done. The rest of the epoch,
// [position, size), is dealt out over the new replica count the same way
// (padded from the epoch's start, or truncated), so the epoch still covers
// every sample once plus the padding. With position 0, or a position that
// is a whole number of steps of the same replica count, this is exactly
// the uninterrupted epoch.
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

  // The rest of `epoch` from `position` of its order (0 <= position):
  // NumSamplesFrom(position) indices.
  std::vector<int64_t> IndicesFrom(int64_t epoch, int64_t position) const;

  // Samples per replica per epoch: ceil(size / replicas), or
  // floor(size / replicas) with drop_last.
  int64_t num_samples() const { return num_samples_; }
  // Samples per replica in the rest of an epoch from `position`.
  int64_t NumSamplesFrom(int64_t position) const;

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

// The sampler seed of each epoch: a pure function of the job seed and the
// epoch, so that the coordinator hands out the same seed to every worker and
// a worker whose durable coordinator is unreachable can begin the epoch on
// its own. Thread-safe (pure).
#ifndef COHORT_COMMON_SAMPLER_SEED_H_
#define COHORT_COMMON_SAMPLER_SEED_H_

#include <cstdint>

namespace cohort {

// splitmix64(job_seed ^ splitmix64(epoch)): the same for every worker, and
// different epochs give unrelated seeds.
inline uint64_t SamplerSeed(uint64_t job_seed, int64_t epoch) {
  const auto mix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  return mix(job_seed ^ mix(static_cast<uint64_t>(epoch)));
}

}  // namespace cohort

#endif  // COHORT_COMMON_SAMPLER_SEED_H_

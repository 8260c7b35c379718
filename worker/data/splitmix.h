// SplitMix64: the small, fast, portable generator behind cohort's data
// randomness (synthetic samples, sampler permutations).
//
// std:: distributions are implementation-defined, and every replica on
// every node must draw identical streams, so cohort uses its own. State is
// one word, so a stream per sample is cheap. Ownership: a value type.
// Thread safety: none (one generator per thread).
#ifndef COHORT_WORKER_DATA_SPLITMIX_H_
#define COHORT_WORKER_DATA_SPLITMIX_H_

#include <cstdint>

namespace cohort {

// SplitMix64's finaliser: a bijective mix, also used to derive seeds.
inline uint64_t SplitMix64Mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return SplitMix64Mix(state_);
  }

 private:
  uint64_t state_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_SPLITMIX_H_

// The rules every process agrees on for sparse tables
// (EmbeddingBagSpec.sparse): which shard owns a row, and a row's initial
// value. Both are functions of their arguments alone, so a shard creates a
// row the first time it needs it and a worker never holds a whole table,
// and a dense model initialised with the same table seed starts equal.
//
// Stateless; every function is thread-safe.
#ifndef COHORT_COMMON_SPARSE_ROWS_H_
#define COHORT_COMMON_SPARSE_ROWS_H_

#include <cstdint>

namespace cohort {

// SplitMix64's finalizer (Steele, Lea, Flood, OOPSLA 2014): a bijection of
// 64-bit words that spreads every input bit over the output.
inline uint64_t SparseRowMix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The shard (of `shards`) that owns row `row` of sparse table `table`:
// hashed, so that the rows a power-law id distribution makes hot spread
// over the shards instead of landing on the first.
inline int SparseRowOwner(int table, int64_t row, int shards) {
  const uint64_t h = SparseRowMix(
      static_cast<uint64_t>(row) ^
      SparseRowMix(static_cast<uint64_t>(table) + 0x9e3779b97f4a7c15ull));
  return static_cast<int>(h % static_cast<uint64_t>(shards));
}

// Row `row` of a table with `seed`: `dim` values uniform in [-bound,
// bound), element d from the hash of (seed, row * dim + d), into `out`.
// The dense and the sparse path both fill rows through this.
template <typename T>
void SparseRowInit(uint64_t seed, int64_t row, int64_t dim, double bound,
                   T* out) {
  const uint64_t key = SparseRowMix(seed);
  const uint64_t base = static_cast<uint64_t>(row) * static_cast<uint64_t>(dim);
  for (int64_t d = 0; d < dim; ++d) {
    const uint64_t h = SparseRowMix(
        key + (base + static_cast<uint64_t>(d) + 1) * 0x9e3779b97f4a7c15ull);
    const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
    out[d] = static_cast<T>(-bound + 2 * bound * u);
  }
}

}  // namespace cohort

#endif  // COHORT_COMMON_SPARSE_ROWS_H_

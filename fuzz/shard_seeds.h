// The seeds of fuzz/shard_fuzzer.cc (make_seeds shard): valid
// ShardFuzzCases for SYNC, SSP and ASYNC, dense only and with sparse tables
// (under optimizers the tables accept and one they refuse), so that fuzzing
// starts from the shard's success paths.
//
// Stateless; thread-safe.
#ifndef COHORT_FUZZ_SHARD_SEEDS_H_
#define COHORT_FUZZ_SHARD_SEEDS_H_

#include <map>
#include <string>

namespace cohort {
namespace fuzz {

// File name -> a ShardFuzzCase in wire format.
std::map<std::string, std::string> ShardSeeds();

}  // namespace fuzz
}  // namespace cohort

#endif  // COHORT_FUZZ_SHARD_SEEDS_H_

// A structure-aware libFuzzer mutator for inputs in protobuf wire format.
//
// Byte mutations rarely keep nested length prefixes right, so a value such
// as INT64_MAX in a field three messages deep is almost never reached. This
// mutator parses the input, changes one field through reflection (a
// boundary or random number, NaN, a flipped bool, an unknown enum value, a
// mutated string, an added, copied or removed repeated element or
// sub-message) and serializes it again. Inputs that do not parse, and a
// quarter of the rest, get libFuzzer's own byte mutations.
//
// Thread safety: none needed (libFuzzer mutates on one thread).
#ifndef COHORT_FUZZ_PROTO_MUTATOR_H_
#define COHORT_FUZZ_PROTO_MUTATOR_H_

#include <cstddef>
#include <cstdint>

#include "google/protobuf/message.h"

namespace cohort {
namespace fuzz {

// Mutates data[0, size) as a `prototype`-typed message; returns the new
// size (at most max_size), as LLVMFuzzerCustomMutator does.
size_t MutateProtoInput(const google::protobuf::Message& prototype,
                        uint8_t* data, size_t size, size_t max_size,
                        unsigned seed);

}  // namespace fuzz
}  // namespace cohort

#endif  // COHORT_FUZZ_PROTO_MUTATOR_H_

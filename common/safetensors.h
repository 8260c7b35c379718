// The safetensors file format (Hugging Face's; read by the `safetensors`
// package and, being an 8-byte length, a JSON header and raw little-endian
// bytes, by a few lines of any language): what `cohort export` writes.
//
//   uint64  N, the header's byte length
//   N bytes JSON: {"__metadata__": {"key": "value", ...},
//                  "NAME": {"dtype": "F32", "shape": [..],
//                           "data_offsets": [BEGIN, END]}, ...}
//           padded with spaces to a multiple of 8
//   the tensors' bytes, back to back, offsets relative to here
//
// Plain functions; thread-safe.
#ifndef COHORT_COMMON_SAFETENSORS_H_
#define COHORT_COMMON_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cohort {

struct SafeTensor {
  std::string name;
  std::string dtype;  // "F32" or "I64"
  std::vector<int64_t> shape;
  std::string bytes;  // little-endian, product(shape) x the item size
};

// The whole file. Tensors are written in the order given (names must be
// unique); metadata values are strings, as the format requires.
std::string SafetensorsBytes(
    const std::vector<SafeTensor>& tensors,
    const std::map<std::string, std::string>& metadata);

struct SafetensorsFile {
  std::map<std::string, SafeTensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Parses a whole file (`bytes`, named `path` in messages). DataLoss naming
// the file for a malformed header (JSON that does not parse, nests deeper
// than ParseJson allows, repeats a tensor name, or has metadata that are
// not strings), offsets outside the data, a byte count that disagrees with
// the dtype and shape, or two tensors whose bytes overlap. Messages are one
// line; names from the file appear escaped, the header's bytes never. Every
// dtype is accepted here (F32, F16, BF16, I64 ...): the caller decides what
// it can use.
absl::StatusOr<SafetensorsFile> ParseSafetensors(const std::string& bytes,
                                                 const std::string& path);

// The values of a floating-point tensor (F32, F16 or BF16) as floats;
// InvalidArgument naming the tensor for another dtype.
absl::StatusOr<std::vector<float>> SafeTensorFloats(const SafeTensor& t);

}  // namespace cohort

#endif  // COHORT_COMMON_SAFETENSORS_H_

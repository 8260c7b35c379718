// NumPy .npy files (format versions 1.0, 2.0 and 3.0), memory-mapped.
//
// .npz archives (np.savez) are read too: their stored members are mapped
// in place, nothing is copied.
//
// Only what training needs is accepted: C order, little-endian (or
// single-byte) float32, float16, uint8, int32 and int64. Anything else is
// refused by name ("big-endian", "Fortran order", "dtype '<c8'"), and the
// file must be exactly as long as its header says.
//
// Ownership: an NpyArray owns its mapping. Thread safety: immutable after
// Open, so any thread may read data().
#ifndef COHORT_WORKER_DATA_NPY_H_
#define COHORT_WORKER_DATA_NPY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/half.h"

namespace cohort {

// kUint16 and kUint32 only hold token ids (data kind TOKENS).
enum class NpyType {
  kFloat32,
  kFloat16,
  kUint8,
  kInt32,
  kInt64,
  kUint16,
  kUint32
};

// "float32", "int64", ...
const char* NpyTypeName(NpyType type);
int NpyItemBytes(NpyType type);

struct NpyHeader {
  NpyType type = NpyType::kFloat32;
  std::vector<int64_t> shape;
  // Where the data starts, in bytes from the start of the file.
  int64_t data_offset = 0;
  // NumElements(shape) x the item size; fits in int64.
  int64_t data_bytes = 0;
};

// Parses the header at the start of `bytes` (the file's first bytes; at
// most 64 KiB of header are read). DataLoss naming `path` for anything
// malformed (a key given twice, or one NumPy does not write, included),
// InvalidArgument for a well-formed header of a kind not supported or
// larger than 64 KiB.
absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view bytes,
                                         const std::string& path);

class NpyArray {
 public:
  // Maps `path` read-only after checking its header and length.
  static absl::StatusOr<std::unique_ptr<NpyArray>> Open(
      const std::string& path);
  // Maps the array `member` (a name as np.savez gives it: "x", or "x.npy")
  // of the .npz archive `path` in place. The member must be stored, as
  // np.savez stores it: a compressed one (np.savez_compressed) is refused
  // by name, since it cannot be mapped, and so is an archive holding two
  // members of one name. path() is then "PATH:MEMBER".
  static absl::StatusOr<std::unique_ptr<NpyArray>> OpenInArchive(
      const std::string& path, const std::string& member);
  ~NpyArray();
  NpyArray(const NpyArray&) = delete;
  NpyArray& operator=(const NpyArray&) = delete;

  const std::string& path() const { return path_; }
  NpyType type() const { return header_.type; }
  const std::vector<int64_t>& shape() const { return header_.shape; }
  // The elements, header_.data_bytes of them, row-major.
  const uint8_t* data() const { return data_; }

 private:
  NpyArray(std::string path, NpyHeader header, void* map, size_t map_bytes);

  const std::string path_;
  const NpyHeader header_;
  void* const map_;
  const size_t map_bytes_;
  const uint8_t* const data_;
};

// A version 1.0 .npy file of float32 `data` shaped `shape` (C order), as
// np.save writes it.
std::string NpyFloat32Bytes(const std::vector<int64_t>& shape,
                            const float* data);

// `n` values of `type` at `p` as training reads inputs: float32 as is,
// float16 widened, uint8 divided by 255. Other types are left alone (the
// callers refuse them first).
void NpyToFloats(NpyType type, const uint8_t* p, int64_t n, float* out);

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_NPY_H_

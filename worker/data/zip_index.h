// The member index of a ZIP archive (as NumPy's np.savez writes .npz
// files: stored or deflated members, ZIP64 records for large ones), so that
// a stored member can be memory-mapped in place.
//
// Only reading the directory is done here; nothing is decompressed.
// Thread safety: pure functions.
#ifndef COHORT_WORKER_DATA_ZIP_INDEX_H_
#define COHORT_WORKER_DATA_ZIP_INDEX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

struct ZipMember {
  std::string name;
  bool stored = false;  // method 0: the bytes are the member itself
  bool encrypted = false;
  int64_t offset = 0;  // of the member's data, from the archive's start
  int64_t size = 0;    // uncompressed
  int64_t compressed_size = 0;
};

// The members of the archive `bytes` (the whole file, named `path` in
// messages). DataLoss naming `path` for anything malformed: no end record,
// a directory or member outside the file, a member whose local header
// disagrees, two members of one name.
absl::StatusOr<std::vector<ZipMember>> ReadZipIndex(absl::string_view bytes,
                                                    const std::string& path);

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_ZIP_INDEX_H_

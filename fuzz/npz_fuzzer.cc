// Fuzzes the .npz reader (worker/data/zip_index.h and
// NpyArray::OpenInArchive): the ZIP index on the raw input, and the array
// "x" of the input written as an archive.
//
// Properties: an error is DATA_LOSS, INVALID_ARGUMENT or NOT_FOUND naming
// the file; every member the index accepts lies inside the file; an
// accepted array's every data byte can be read.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "fuzz/fuzz_util.h"
#include "worker/data/npy.h"
#include "worker/data/zip_index.h"

namespace cohort {
namespace {

fuzz::ScratchDir& Dir() {
  static fuzz::ScratchDir dir;
  return dir;
}

void CheckError(const absl::Status& s, const std::string& path) {
  const absl::StatusCode code = s.code();
  FUZZ_CHECK(code == absl::StatusCode::kDataLoss ||
                 code == absl::StatusCode::kInvalidArgument ||
                 code == absl::StatusCode::kNotFound,
             s.ToString());
  FUZZ_CHECK(absl::StrContains(s.message(), path), s.ToString());
}

void Run(absl::string_view input) {
  Dir().Clear();
  const std::string path = Dir().Write("a.npz", input);
  absl::StatusOr<std::vector<ZipMember>> index = ReadZipIndex(input, path);
  if (index.ok()) {
    for (const ZipMember& m : *index) {
      FUZZ_CHECK(m.offset >= 0 && m.compressed_size >= 0 &&
                     m.offset + m.compressed_size <=
                         static_cast<int64_t>(input.size()),
                 "a member outside the file");
    }
  } else {
    CheckError(index.status(), path);
  }
  absl::StatusOr<std::unique_ptr<NpyArray>> array =
      NpyArray::OpenInArchive(path, "x");
  if (!array.ok()) {
    CheckError(array.status(), path);
    return;
  }
  FUZZ_CHECK(index.ok(), "OpenInArchive accepted what the index refused");
  int64_t bytes = NpyItemBytes((*array)->type());
  for (int64_t d : (*array)->shape()) bytes *= d;
  uint64_t sum = 0;
  for (int64_t i = 0; i < bytes; ++i) sum += (*array)->data()[i];
  FUZZ_CHECK(sum <= 255u * static_cast<uint64_t>(bytes), "unreachable");
}

}  // namespace
}  // namespace cohort

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cohort::Run(cohort::fuzz::AsView(data, size));
  return 0;
}

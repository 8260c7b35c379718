// Fuzzes the .npy reader (worker/data/npy.h): the header parser on the raw
// input, and NpyArray::Open on the input written as a file.
//
// Properties: the parser and Open agree; an error is DATA_LOSS or
// INVALID_ARGUMENT naming the file; an accepted array's header says
// exactly how long the file is, and every byte of its data can be read.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "fuzz/fuzz_util.h"
#include "worker/data/npy.h"

namespace cohort {
namespace {

fuzz::ScratchDir& Dir() {
  static fuzz::ScratchDir dir;
  return dir;
}

void Run(absl::string_view input) {
  Dir().Clear();
  const std::string path = Dir().Write("a.npy", input);
  absl::StatusOr<NpyHeader> header = ParseNpyHeader(input, path);
  absl::StatusOr<std::unique_ptr<NpyArray>> array = NpyArray::Open(path);
  if (!array.ok()) {
    const absl::StatusCode code = array.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kDataLoss ||
                   code == absl::StatusCode::kInvalidArgument,
               array.status().ToString());
    FUZZ_CHECK(absl::StrContains(array.status().message(), path),
               array.status().ToString());
    return;
  }
  FUZZ_CHECK(header.ok(), "Open accepted what the parser refused");
  FUZZ_CHECK(header->data_offset + header->data_bytes ==
                 static_cast<int64_t>(input.size()),
             "accepted a file of another length than its header says");
  int64_t elements = 1;
  for (int64_t d : (*array)->shape()) elements *= d;
  FUZZ_CHECK(elements * NpyItemBytes((*array)->type()) == header->data_bytes,
             "shape and data size disagree");
  uint64_t sum = 0;
  for (int64_t i = 0; i < header->data_bytes; ++i) sum += (*array)->data()[i];
  FUZZ_CHECK(sum <= 255u * static_cast<uint64_t>(header->data_bytes),
             "unreachable");
}

}  // namespace
}  // namespace cohort

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cohort::Run(cohort::fuzz::AsView(data, size));
  return 0;
}

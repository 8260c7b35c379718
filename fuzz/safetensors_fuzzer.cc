// Fuzzes the safetensors reader (common/safetensors.h), which `cohort train
// --init-from` feeds with files from anywhere.
//
// Properties: an error is DATA_LOSS naming the file; every accepted tensor
// holds exactly product(shape) x its item size bytes; floating-point ones
// convert to that many floats; writing the accepted tensors back and
// parsing again gives the same tensors.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/safetensors.h"
#include "fuzz/fuzz_util.h"

namespace cohort {
namespace {

void Run(absl::string_view input) {
  const std::string path = "in.safetensors";
  absl::StatusOr<SafetensorsFile> f =
      ParseSafetensors(std::string(input), path);
  if (!f.ok()) {
    FUZZ_CHECK(f.status().code() == absl::StatusCode::kDataLoss,
               f.status().ToString());
    FUZZ_CHECK(absl::StrContains(f.status().message(), path),
               f.status().ToString());
    return;
  }
  std::vector<SafeTensor> tensors;
  for (const auto& [name, t] : f->tensors) {
    absl::StatusOr<std::vector<float>> v = SafeTensorFloats(t);
    if (v.ok()) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      FUZZ_CHECK(static_cast<int64_t>(v->size()) == n,
                 "float count and shape disagree");
    }
    tensors.push_back(t);
  }
  absl::StatusOr<SafetensorsFile> again =
      ParseSafetensors(SafetensorsBytes(tensors, f->metadata), path);
  FUZZ_CHECK(again.ok(), "a written file did not parse");
  FUZZ_CHECK(again->tensors.size() == f->tensors.size(), "tensors lost");
  for (const auto& [name, t] : f->tensors) {
    const SafeTensor& u = again->tensors.at(name);
    FUZZ_CHECK(u.bytes == t.bytes && u.shape == t.shape && u.dtype == t.dtype,
               "a tensor changed on the way back");
  }
}

}  // namespace
}  // namespace cohort

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cohort::Run(cohort::fuzz::AsView(data, size));
  return 0;
}

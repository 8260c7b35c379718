// Fuzzes the CSV table parser (worker/data/csv_dataset.h) with a fixed
// spec: target column "label", 3 classes, 2 features.
//
// Properties: an error is INVALID_ARGUMENT naming the file; an accepted
// table has one class per row, each in [0, 3), and 2 finite values per row.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "absl/strings/match.h"
#include "fuzz/fuzz_util.h"
#include "worker/data/csv_dataset.h"

namespace cohort {
namespace {

void Run(absl::string_view input) {
  CsvSpec spec;
  spec.set_target("label");
  spec.set_classes(3);
  spec.set_features(2);
  absl::StatusOr<CsvTable> t = ParseCsv(input, "f.csv", spec);
  if (!t.ok()) {
    FUZZ_CHECK(t.status().code() == absl::StatusCode::kInvalidArgument,
               t.status().ToString());
    FUZZ_CHECK(absl::StartsWith(t.status().message(), "f.csv"),
               t.status().ToString());
    return;
  }
  FUZZ_CHECK(t->values.size() == 2 * t->classes.size(), "row width");
  for (int32_t c : t->classes) FUZZ_CHECK(c >= 0 && c < 3, "class range");
  for (float v : t->values) FUZZ_CHECK(std::isfinite(v), "finite values");
}

}  // namespace
}  // namespace cohort

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cohort::Run(cohort::fuzz::AsView(data, size));
  return 0;
}

// Fuzzes the CIFAR-10 binary reader (worker/data/cifar10.h).
//
// Input: one flag byte, then up to six files separated by fuzz::kSplit:
// test_batch.bin, then data_batch_1.bin .. data_batch_5.bin (a missing one
// is not written). Flags: bit 0 normalises; bit 1 sets train_limit to 1;
// bit 2 puts the files in cifar-10-batches-bin/ (the official archive's
// layout); bit 3 leaves test_batch.bin out.
//
// Properties: an error is DATA_LOSS or NOT_FOUND naming the directory; an
// accepted set has exactly the records the files hold, each readable.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz/dataset_checks.h"
#include "fuzz/fuzz_util.h"
#include "worker/data/cifar10.h"

namespace cohort {
namespace {

constexpr int64_t kRecordBytes = 1 + 3 * 32 * 32;
constexpr size_t kMaxTrainFiles = 5;

// One directory per process, removed at exit.
fuzz::ScratchDir& Dir() {
  static fuzz::ScratchDir dir;
  return dir;
}

void Run(absl::string_view input) {
  const uint8_t flags = static_cast<uint8_t>(input[0]);
  const bool normalize = flags & 1;
  const int64_t train_limit = (flags & 2) ? 1 : 0;
  const std::string sub = (flags & 4) ? "cifar-10-batches-bin/" : "";
  const bool omit_test = flags & 8;
  const std::vector<absl::string_view> parts =
      fuzz::SplitInput(input.substr(1));

  Dir().Clear();
  if (!omit_test) Dir().Write(sub + "test_batch.bin", parts[0]);
  int64_t train = 0;
  for (size_t i = 1; i < parts.size() && i <= kMaxTrainFiles; ++i) {
    Dir().Write(absl::StrCat(sub, "data_batch_", i, ".bin"), parts[i]);
    train += static_cast<int64_t>(parts[i].size()) / kRecordBytes;
  }
  absl::StatusOr<DataSplits> splits =
      LoadCifar10(Dir().path(), normalize, train_limit);
  if (!splits.ok()) {
    fuzz::CheckReaderError(splits.status(), Dir().path());
    return;
  }
  FUZZ_CHECK(!omit_test, "accepted a directory without test_batch.bin");
  if (train_limit > 0 && train > train_limit) train = train_limit;
  fuzz::CheckSplits(*splits, Shape{3, 32, 32}, train,
                    static_cast<int64_t>(parts[0].size()) / kRecordBytes);
}

}  // namespace
}  // namespace cohort

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  cohort::Run(cohort::fuzz::AsView(data, size));
  return 0;
}

// Fuzzes the MNIST IDX reader (worker/data/mnist.h, file_reader.h).
//
// Input: one flag byte, then up to four files separated by fuzz::kSplit:
// train images, train labels, test images, test labels (a missing one is
// not written). Flags: bit 0 names the files "*.gz" so they go through the
// inflater; bit 1 (with bit 0) gzips the payload first, so that fuzzed IDX
// bytes also reach the parser behind it; bit 2 normalises; bit 3 sets
// train_limit to 1.
//
// Properties: an error is DATA_LOSS or NOT_FOUND naming the directory; an
// accepted set has exactly the records the files hold, each readable.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/dataset_checks.h"
#include "fuzz/fuzz_util.h"
#include "worker/data/file_reader.h"
#include "worker/data/mnist.h"

namespace cohort {
namespace {

constexpr const char* kNames[] = {
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
};
constexpr int64_t kImageHeader = 16;
constexpr int64_t kImageBytes = 28 * 28;

// One directory per process, removed at exit.
fuzz::ScratchDir& Dir() {
  static fuzz::ScratchDir dir;
  return dir;
}

void Run(absl::string_view input) {
  const uint8_t flags = static_cast<uint8_t>(input[0]);
  const bool gz = flags & 1;
  const bool compress = gz && (flags & 2);
  const bool normalize = flags & 4;
  const int64_t train_limit = (flags & 8) ? 1 : 0;
  const std::vector<absl::string_view> parts =
      fuzz::SplitInput(input.substr(1));

  Dir().Clear();
  for (size_t i = 0; i < parts.size() && i < 4; ++i) {
    const std::string name = gz ? std::string(kNames[i]) + ".gz" : kNames[i];
    Dir().Write(name, compress ? fuzz::Gzip(parts[i]) : std::string(parts[i]));
  }
  absl::StatusOr<DataSplits> splits =
      LoadMnist(Dir().path(), normalize, train_limit);
  if (!splits.ok()) {
    fuzz::CheckReaderError(splits.status(), Dir().path());
    return;
  }

  // Accepted: the record counts follow from the (decompressed) image files.
  auto records = [&](int i) -> int64_t {
    std::string bytes(parts[i]);
    if (gz && !compress) {
      absl::StatusOr<std::vector<uint8_t>> raw =
          Gunzip(std::vector<uint8_t>(bytes.begin(), bytes.end()), "x");
      FUZZ_CHECK(raw.ok(), "accepted a file that does not inflate");
      bytes.assign(raw->begin(), raw->end());
    }
    return (static_cast<int64_t>(bytes.size()) - kImageHeader) / kImageBytes;
  };
  int64_t train = records(0);
  if (train_limit > 0 && train > train_limit) train = train_limit;
  fuzz::CheckSplits(*splits, Shape{1, 28, 28}, train, records(2));
}

}  // namespace
}  // namespace cohort

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  cohort::Run(cohort::fuzz::AsView(data, size));
  return 0;
}

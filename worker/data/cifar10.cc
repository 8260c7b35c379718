#include "worker/data/cifar10.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "worker/data/byte_image_dataset.h"
#include "worker/data/file_reader.h"

namespace cohort {
namespace {

constexpr int64_t kImageBytes = 3 * 32 * 32;
constexpr int64_t kRecordBytes = 1 + kImageBytes;
constexpr int kClasses = 10;
constexpr int kMaxTrainBatches = 5;
constexpr char kTestFile[] = "test_batch.bin";

std::vector<std::string> TrainFileNames() {
  std::vector<std::string> names;
  for (int i = 1; i <= kMaxTrainBatches; ++i) {
    names.push_back(absl::StrCat("data_batch_", i, ".bin"));
  }
  return names;
}

// The first of `dir` and `dir`/cifar-10-batches-bin that holds any CIFAR-10
// file, or NotFound listing what was looked for.
absl::StatusOr<std::string> FindCifarDir(const std::string& dir) {
  std::vector<std::string> names = TrainFileNames();
  names.push_back(kTestFile);
  const std::string candidates[] = {dir, dir + "/cifar-10-batches-bin"};
  for (const std::string& candidate : candidates) {
    RETURN_IF_ERROR(CheckDirReadable(candidate));
    for (const std::string& name : names) {
      if (FileExists(candidate + "/" + name)) return candidate;
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "no CIFAR-10 files found: looked for data_batch_1.bin..data_batch_",
      kMaxTrainBatches, ".bin and ", kTestFile, " in ",
      QuoteName(candidates[0]), " and ", QuoteName(candidates[1]), "."));
}

// Appends the records of `path` to `pixels` and `labels`.
absl::Status AppendRecords(const std::string& path,
                           std::vector<uint8_t>* pixels,
                           std::vector<uint8_t>* labels) {
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFileBytes(path));
  const int64_t size = static_cast<int64_t>(bytes.size());
  if (size == 0 || size % kRecordBytes != 0) {
    return absl::DataLossError(
        absl::StrCat(QuoteName(path), " is ", size,
                     " bytes long, expected a non-zero multiple of ",
                     kRecordBytes, " (the CIFAR-10 record size)."));
  }
  const int64_t records = size / kRecordBytes;
  pixels->reserve(pixels->size() + records * kImageBytes);
  for (int64_t r = 0; r < records; ++r) {
    const uint8_t* record = bytes.data() + r * kRecordBytes;
    if (record[0] >= kClasses) {
      return absl::DataLossError(
          absl::StrCat(QuoteName(path), ": label ", static_cast<int>(record[0]),
                       " of record ", r, " is out of range, expected 0..",
                       kClasses - 1, "."));
    }
    labels->push_back(record[0]);
    pixels->insert(pixels->end(), record + 1, record + kRecordBytes);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ByteImageDataset>> LoadFiles(
    const std::vector<std::string>& paths, bool normalize) {
  std::vector<uint8_t> pixels, labels;
  for (const std::string& path : paths) {
    RETURN_IF_ERROR(AppendRecords(path, &pixels, &labels));
  }
  return std::make_unique<ByteImageDataset>(
      Shape{3, 32, 32}, kClasses, std::move(pixels), std::move(labels),
      normalize ? absl::Span<const float>(kCifar10Means)
                : absl::Span<const float>(),
      normalize ? absl::Span<const float>(kCifar10Stds)
                : absl::Span<const float>());
}

}  // namespace

absl::StatusOr<DataSplits> LoadCifar10(const std::string& dir, bool normalize,
                                       int64_t train_limit) {
  ASSIGN_OR_RETURN(std::string found, FindCifarDir(dir));
  std::vector<std::string> train_paths;
  for (const std::string& name : TrainFileNames()) {
    if (FileExists(found + "/" + name))
      train_paths.push_back(found + "/" + name);
  }
  if (train_paths.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no CIFAR-10 training files found: looked for data_batch_1.bin..",
        "data_batch_", kMaxTrainBatches, ".bin in ", QuoteName(found), "."));
  }
  const std::string test_path = found + "/" + kTestFile;
  if (!FileExists(test_path)) {
    return absl::NotFoundError(
        absl::StrCat("CIFAR-10 test file not found: looked for ",
                     QuoteName(test_path), "."));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ByteImageDataset> train,
                   LoadFiles(train_paths, normalize));
  ASSIGN_OR_RETURN(std::unique_ptr<ByteImageDataset> test,
                   LoadFiles({test_path}, normalize));
  if (train_limit > 0) train->Truncate(train_limit);
  DataSplits splits;
  splits.train = std::move(train);
  splits.test = std::move(test);
  return splits;
}

}  // namespace cohort

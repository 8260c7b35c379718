#include "worker/data/mnist.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "worker/data/byte_image_dataset.h"
#include "worker/data/file_reader.h"

namespace cohort {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, rank 3
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, rank 1
constexpr int64_t kSide = 28;
constexpr int kClasses = 10;

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string Hex(uint32_t v) { return absl::StrFormat("0x%08x", v); }

// `dir`/`name`.gz or, failing that, `dir`/`name`.
absl::StatusOr<std::string> FindIdxFile(const std::string& dir,
                                        const std::string& name) {
  const std::string gz = absl::StrCat(dir, "/", name, ".gz");
  const std::string raw = absl::StrCat(dir, "/", name);
  RETURN_IF_ERROR(CheckDirReadable(dir));
  if (FileExists(gz)) return gz;
  if (FileExists(raw)) return raw;
  return absl::NotFoundError(
      absl::StrCat("MNIST file ", name, " not found: looked for ",
                   QuoteName(gz), " and ", QuoteName(raw), "."));
}

// Checks the magic number and that the file is exactly as long as its
// header says; returns the record count.
absl::StatusOr<int64_t> CheckIdx(const std::string& path,
                                 const std::vector<uint8_t>& bytes,
                                 uint32_t magic, int64_t header_bytes,
                                 int64_t record_bytes) {
  if (static_cast<int64_t>(bytes.size()) < header_bytes) {
    return absl::DataLossError(absl::StrCat(
        QuoteName(path), " is truncated: expected at least ", header_bytes,
        " bytes of IDX header, got ", bytes.size(), "."));
  }
  const uint32_t got_magic = BigEndian32(bytes.data());
  if (got_magic != magic) {
    return absl::DataLossError(
        absl::StrCat(QuoteName(path), " has IDX magic number ", Hex(got_magic),
                     ", expected ", Hex(magic), "."));
  }
  const int64_t count = BigEndian32(bytes.data() + 4);
  if (count == 0) {
    return absl::DataLossError(absl::StrCat(
        QuoteName(path), " holds no records (its header says 0)."));
  }
  const int64_t expected = header_bytes + count * record_bytes;
  if (static_cast<int64_t>(bytes.size()) != expected) {
    return absl::DataLossError(absl::StrCat(
        QuoteName(path),
        static_cast<int64_t>(bytes.size()) < expected ? " is truncated"
                                                      : " is too long",
        ": expected ", expected, " bytes for ", count, " records, got ",
        bytes.size(), "."));
  }
  return count;
}

// An IDX file's size by its header: `header_bytes` with the record count
// at byte 4 and, for images, rows and columns at 8 and 12 (0 until the
// header has arrived). Bounds what a .gz file may inflate to.
ExpectedSize IdxSize(size_t header_bytes) {
  return [header_bytes](const uint8_t* head, size_t n) -> size_t {
    if (n < header_bytes) return 0;
    uint64_t record = 1;
    for (size_t at = 8; at < header_bytes; at += 4) {
      record *= BigEndian32(head + at);
    }
    return header_bytes + uint64_t{BigEndian32(head + 4)} * record;
  };
}

// The pixels of an images file, header stripped.
absl::StatusOr<std::vector<uint8_t>> ReadImages(const std::string& path) {
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                   ReadMaybeGzipped(path, IdxSize(16)));
  if (bytes.size() >= 16) {
    const uint32_t rows = BigEndian32(bytes.data() + 8);
    const uint32_t cols = BigEndian32(bytes.data() + 12);
    if (BigEndian32(bytes.data()) == kImagesMagic &&
        (rows != kSide || cols != kSide)) {
      return absl::DataLossError(absl::StrCat(QuoteName(path), " holds ", rows,
                                              "x", cols, " images, expected ",
                                              kSide, "x", kSide, "."));
    }
  }
  RETURN_IF_ERROR(
      CheckIdx(path, bytes, kImagesMagic, 16, kSide * kSide).status());
  bytes.erase(bytes.begin(), bytes.begin() + 16);
  return bytes;
}

absl::StatusOr<std::vector<uint8_t>> ReadLabels(const std::string& path) {
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                   ReadMaybeGzipped(path, IdxSize(8)));
  RETURN_IF_ERROR(CheckIdx(path, bytes, kLabelsMagic, 8, 1).status());
  bytes.erase(bytes.begin(), bytes.begin() + 8);
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] >= kClasses) {
      return absl::DataLossError(
          absl::StrCat(QuoteName(path), ": label ", static_cast<int>(bytes[i]),
                       " of record ", i, " is out of range, expected 0..",
                       kClasses - 1, "."));
    }
  }
  return bytes;
}

absl::StatusOr<std::unique_ptr<ByteImageDataset>> LoadSplit(
    const std::string& dir, const std::string& prefix, bool normalize) {
  ASSIGN_OR_RETURN(std::string images_path,
                   FindIdxFile(dir, prefix + "-images-idx3-ubyte"));
  ASSIGN_OR_RETURN(std::string labels_path,
                   FindIdxFile(dir, prefix + "-labels-idx1-ubyte"));
  ASSIGN_OR_RETURN(std::vector<uint8_t> pixels, ReadImages(images_path));
  ASSIGN_OR_RETURN(std::vector<uint8_t> labels, ReadLabels(labels_path));
  const size_t images = pixels.size() / (kSide * kSide);
  if (images != labels.size()) {
    return absl::DataLossError(
        absl::StrCat(QuoteName(images_path), " holds ", images, " images but ",
                     QuoteName(labels_path), " holds ", labels.size(),
                     " labels; they must match."));
  }
  const float mean[] = {kMnistMean};
  const float stdev[] = {kMnistStd};
  return std::make_unique<ByteImageDataset>(
      Shape{1, kSide, kSide}, kClasses, std::move(pixels), std::move(labels),
      normalize ? absl::Span<const float>(mean) : absl::Span<const float>(),
      normalize ? absl::Span<const float>(stdev) : absl::Span<const float>());
}

}  // namespace

absl::StatusOr<DataSplits> LoadMnist(const std::string& dir, bool normalize,
                                     int64_t train_limit) {
  ASSIGN_OR_RETURN(std::unique_ptr<ByteImageDataset> train,
                   LoadSplit(dir, "train", normalize));
  ASSIGN_OR_RETURN(std::unique_ptr<ByteImageDataset> test,
                   LoadSplit(dir, "t10k", normalize));
  if (train_limit > 0) train->Truncate(train_limit);
  DataSplits splits;
  splits.train = std::move(train);
  splits.test = std::move(test);
  return splits;
}

}  // namespace cohort

#include "worker/data/tokens_dataset.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/quote.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "worker/data/mapped_file.h"
#include "worker/data/npy.h"

namespace cohort {

class TokenFile {
 public:
  // Maps `path` and checks every id against `vocab`.
  static absl::StatusOr<std::shared_ptr<const TokenFile>> Open(
      const std::string& path, TokensSpec::Format format, int vocab);

  int64_t count() const { return count_; }
  const std::string& path() const { return path_; }
  int64_t At(int64_t i) const {
    switch (width_) {
      case 1:
        return data_[i];
      case 2: {
        uint16_t v;
        std::memcpy(&v, data_ + 2 * i, 2);
        return v;
      }
      case 4: {
        uint32_t v;
        std::memcpy(&v, data_ + 4 * i, 4);
        return signed_ ? static_cast<int32_t>(v) : int64_t{v};
      }
      default: {
        int64_t v;
        std::memcpy(&v, data_ + 8 * i, 8);
        return v;
      }
    }
  }

 private:
  absl::Status OpenRaw(TokensSpec::Format format);
  absl::Status OpenNpy();
  absl::Status CheckIds(int vocab) const;

  std::string path_;
  MappedFile raw_;
  std::unique_ptr<NpyArray> npy_;
  const uint8_t* data_ = nullptr;
  int64_t count_ = 0;
  int width_ = 1;
  bool signed_ = false;
};

absl::StatusOr<std::shared_ptr<const TokenFile>> TokenFile::Open(
    const std::string& path, TokensSpec::Format format, int vocab) {
  auto file = std::make_shared<TokenFile>();
  file->path_ = path;
  RETURN_IF_ERROR(absl::EndsWith(path, ".npy") ? file->OpenNpy()
                                               : file->OpenRaw(format));
  RETURN_IF_ERROR(file->CheckIds(vocab));
  return std::shared_ptr<const TokenFile>(std::move(file));
}

absl::Status TokenFile::OpenRaw(TokensSpec::Format format) {
  RETURN_IF_ERROR(raw_.Map(path_));
  width_ = format == TokensSpec::UINT32   ? 4
           : format == TokensSpec::UINT16 ? 2
                                          : 1;
  if (raw_.bytes() % width_ != 0) {
    return absl::DataLossError(absl::StrCat(
        QuoteName(path_), ": ", raw_.bytes(),
        " bytes is not a whole number of ", TokensSpec::Format_Name(format),
        " ids (", width_, " bytes each)"));
  }
  data_ = static_cast<const uint8_t*>(raw_.map());
  count_ = static_cast<int64_t>(raw_.bytes()) / width_;
  return absl::OkStatus();
}

absl::Status TokenFile::OpenNpy() {
  ASSIGN_OR_RETURN(npy_, NpyArray::Open(path_));
  switch (npy_->type()) {
    case NpyType::kUint8:
    case NpyType::kUint16:
    case NpyType::kUint32:
    case NpyType::kInt32:
    case NpyType::kInt64:
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          QuoteName(path_), ": token ids are ", NpyTypeName(npy_->type()),
          "; use uint8, uint16, uint32, int32 or int64"));
  }
  if (npy_->shape().size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteName(path_), ": token ids must be a 1-D array, got ",
                     npy_->shape().size(), " dimensions"));
  }
  width_ = NpyItemBytes(npy_->type());
  signed_ = npy_->type() == NpyType::kInt32 || npy_->type() == NpyType::kInt64;
  data_ = npy_->data();
  count_ = npy_->shape()[0];
  return absl::OkStatus();
}

absl::Status TokenFile::CheckIds(int vocab) const {
  // Bytes always fit a vocabulary of 256.
  if (width_ == 1 && vocab >= 256) return absl::OkStatus();
  for (int64_t i = 0; i < count_; ++i) {
    const int64_t id = At(i);
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat(QuoteName(path_), ": token ", i, " is ", id,
                       ", outside the vocabulary [0, ", vocab,
                       ") (data.tokens.vocab_size)"));
    }
  }
  return absl::OkStatus();
}

namespace {

std::string Resolve(const std::string& dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || dir.empty()) return path;
  return absl::StrCat(dir, "/", path);
}

// Windows of `context` + 1 tokens (the inputs and the last target) that
// start every `stride` tokens in `count`.
int64_t WindowCount(int64_t count, int context, int stride) {
  if (count < int64_t{context} + 1) return 0;
  return (count - context - 1) / stride + 1;
}

absl::Status CheckSplit(int64_t count, const TokensSpec& t,
                        const std::string& what) {
  if (WindowCount(count, t.context(), t.stride()) > 0) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      what, " holds ", count, " tokens, fewer than one window needs (",
      "data.tokens.context ", t.context(), " + 1)"));
}

}  // namespace

TokensDataset::TokensDataset(std::shared_ptr<const TokenFile> file,
                             int64_t first, int64_t count, int context,
                             int stride, int vocab, int64_t limit)
    : file_(std::move(file)),
      first_(first),
      context_(context),
      stride_(stride),
      vocab_(vocab),
      shape_({1, context}),
      target_shape_({context}) {
  windows_ = WindowCount(count, context, stride);
  if (limit > 0) windows_ = std::min(windows_, limit);
}

absl::Status TokensDataset::Read(int64_t index, uint64_t /*draw*/,
                                 SampleOut& out) const {
  CHECK(index >= 0 && index < windows_)
      << "TokensDataset: window " << index << " of " << windows_;
  const int64_t start = first_ + index * stride_;
  for (int t = 0; t < context_; ++t) {
    out.features[t] = static_cast<float>(file_->At(start + t));
    out.target[t] = static_cast<float>(file_->At(start + t + 1));
  }
  return absl::OkStatus();
}

absl::StatusOr<DataSplits> LoadTokens(const DatasetSpec& spec,
                                      const std::string& dir) {
  TokensSpec t = spec.tokens();
  FillTokensDefaults(&t);
  ASSIGN_OR_RETURN(
      std::shared_ptr<const TokenFile> train,
      TokenFile::Open(Resolve(dir, t.train()), t.format(), t.vocab_size()));
  DataSplits splits;
  int64_t train_count = train->count();
  if (t.test().empty()) {
    // The tail, as nanoGPT splits: the held-out text is contiguous.
    const int64_t held = static_cast<int64_t>(
        static_cast<double>(train->count()) * t.val_fraction());
    train_count -= held;
    RETURN_IF_ERROR(CheckSplit(
        held, t,
        absl::StrCat("the last data.tokens.val_fraction (", t.val_fraction(),
                     ") of ", QuoteName(train->path()))));
    splits.test = std::make_unique<TokensDataset>(
        train, train_count, held, t.context(), t.stride(), t.vocab_size(), 0);
  } else {
    ASSIGN_OR_RETURN(
        std::shared_ptr<const TokenFile> test,
        TokenFile::Open(Resolve(dir, t.test()), t.format(), t.vocab_size()));
    RETURN_IF_ERROR(CheckSplit(test->count(), t, QuoteName(test->path())));
    splits.test = std::make_unique<TokensDataset>(
        test, 0, test->count(), t.context(), t.stride(), t.vocab_size(), 0);
  }
  RETURN_IF_ERROR(CheckSplit(
      train_count, t,
      absl::StrCat("the training split of ", QuoteName(train->path()))));
  splits.train = std::make_unique<TokensDataset>(
      train, 0, train_count, t.context(), t.stride(), t.vocab_size(),
      spec.train_limit());
  return splits;
}

}  // namespace cohort

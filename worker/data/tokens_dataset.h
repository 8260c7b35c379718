// Token sequences for language models (DatasetSpec kind TOKENS): a token
// stream -- a text file's bytes, raw little-endian uint16/uint32 ids
// (nanoGPT's train.bin) or a 1-D .npy array of integer ids -- cut into
// windows of `context` tokens, every `stride` tokens. Sample i is the window
// starting at token i * stride, as features {1, context} (the ids as
// floats, exact below 2^24) and targets {context}: the same window shifted
// by one token, the next token at each position. num_classes() is the
// vocabulary, so the targets are classes (Dataset::token_targets()).
//
// The files are memory-mapped, and every id is checked against the
// vocabulary when a file is opened, so Read() cannot fail.
//
// Ownership: owns its mappings. Thread safety: immutable after
// construction, so Read() is thread-safe.
#ifndef COHORT_WORKER_DATA_TOKENS_DATASET_H_
#define COHORT_WORKER_DATA_TOKENS_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "worker/data/dataset.h"

namespace cohort {

// Ids in a mapped file: `count` tokens of `width` bytes each (1, 2 or 4;
// little-endian), or of a signed 8-byte type for int64 .npy arrays.
class TokenFile;

// Both splits of `spec` (kind TOKENS, defaults filled), paths relative to
// `dir`. Without tokens.test, the last val_fraction of the training file's
// tokens is the test split. Errors name the file: one that cannot be read,
// an id at or above the vocabulary (with its position), a .npy array that is
// not 1-D integers, a raw file whose length is not a multiple of the id
// size, or a split too short for one window.
absl::StatusOr<DataSplits> LoadTokens(const DatasetSpec& spec,
                                      const std::string& dir);

class TokensDataset : public Dataset {
 public:
  // Windows over tokens [first, first + count) of `file`.
  TokensDataset(std::shared_ptr<const TokenFile> file, int64_t first,
                int64_t count, int context, int stride, int vocab,
                int64_t limit);

  int64_t size() const override { return windows_; }
  const Shape& sample_shape() const override { return shape_; }
  const Shape& target_shape() const override { return target_shape_; }
  int num_classes() const override { return vocab_; }
  absl::Status Read(int64_t index, uint64_t draw,
                    SampleOut& out) const override;

 private:
  const std::shared_ptr<const TokenFile> file_;
  const int64_t first_;
  const int context_;
  const int stride_;
  const int vocab_;
  const Shape shape_;
  const Shape target_shape_;
  int64_t windows_ = 0;
};

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_TOKENS_DATASET_H_

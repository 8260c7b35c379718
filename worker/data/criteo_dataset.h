// Click logs in the Criteo layout (DatasetSpec kind CRITEO): tab-separated
// lines of a 0/1 label, dense integer and hexadecimal categorical features
// (worker/data/criteo_line.h), in plain or gzip files, several per split.
//
// Opening parses every file once, streaming it through a fixed buffer, and
// writes one fixed-size record per line (the sample's floats, then the
// label) to an unlinked temporary file, which is then mapped read-only: a
// 45-million-line log costs disk and page cache, not memory, and Read() is
// one copy. Every line is checked when the files are opened, so Read()
// cannot fail.
//
// A sample is flat {dense + 2 categorical} floats; its target is the label
// as a float {1}; num_classes() is 0.
//
// Ownership: the splits of one LoadCriteo share the mapped records
// (shared_ptr); the last one alive unmaps them. Thread safety: immutable
// after construction, so Read() is thread-safe.
#ifndef COHORT_WORKER_DATA_CRITEO_DATASET_H_
#define COHORT_WORKER_DATA_CRITEO_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "worker/data/criteo_line.h"
#include "worker/data/dataset.h"
#include "worker/data/mapped_file.h"
#include "worker/data/scratch_file.h"

namespace cohort {

// Appends one record (parser.record_floats() floats) per line of each of
// `paths`, in order, to `out`; blank lines are skipped. Returns the records
// appended. Errors name the file, and for a bad line its number and column.
absl::StatusOr<int64_t> AppendCriteoFiles(const std::vector<std::string>& paths,
                                          const CriteoLineParser& parser,
                                          ScratchFile* out);

// Both splits of `spec` (kind CRITEO), files relative to `dir` unless
// absolute; the records go to a temporary file in `scratch_dir` ($TMPDIR or
// /tmp when empty). The test split is the test files, or without them the
// last criteo.val_fraction of the training samples. Errors: a file's
// (above), a split with no samples, or a spec built in code with bad
// table_rows (InvalidArgument naming the field).
absl::StatusOr<DataSplits> LoadCriteo(const DatasetSpec& spec,
                                      const std::string& dir,
                                      const std::string& scratch_dir = "");

class CriteoDataset : public Dataset {
 public:
  // Records [first, first + count) of `records` (sample_floats + 1 floats
  // each), at most `limit` of them (0: all). `table_rows` holds each
  // categorical feature's table size.
  CriteoDataset(std::shared_ptr<const MappedFile> records, int64_t first,
                int64_t count, int sample_floats,
                std::vector<int64_t> table_rows, int64_t limit);

  int64_t size() const override { return size_; }
  const Shape& sample_shape() const override { return shape_; }
  const Shape& target_shape() const override { return target_shape_; }
  int num_classes() const override { return 0; }
  const std::vector<int64_t>& categorical_rows() const override {
    return table_rows_;
  }
  absl::Status Read(int64_t index, uint64_t draw,
                    SampleOut& out) const override;

 private:
  const std::shared_ptr<const MappedFile> records_;
  const float* const first_;
  const int sample_floats_;
  const Shape shape_;
  const Shape target_shape_;
  const std::vector<int64_t> table_rows_;
  int64_t size_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_CRITEO_DATASET_H_

// A CSV file of rows of scalars keyed by training step (the first column),
// for people and spreadsheets to read after training
// (worker/loop/training_log.h writes train.csv and eval.csv with it).
//
// A run that starts after step S continues the file: Open keeps its header
// and its rows up to step S, and drops the rows past S (written by a run
// that went on past S and ended before its next checkpoint) and a torn
// last line (a process killed mid-write). A fresh run (S = 0) thus starts
// the file afresh. When this run's columns are not the kept header's
// (another job wrote the file), its first row replaces the file. Rows are
// then appended, and reach the file at each Flush.
//
// Ownership: owns its file. Thread safety: none; one thread writes.
#ifndef COHORT_WORKER_LOOP_SCALAR_LOG_H_
#define COHORT_WORKER_LOOP_SCALAR_LOG_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/loop/append_file.h"

namespace cohort {

class ScalarLog {
 public:
  // Opens (or creates) the CSV file at `path` for a run that starts after
  // step `keep_through_step`, rewriting it (atomically) when rows must go.
  // Errors name the path: an unreadable or unwritable file, or one that is
  // not a regular file.
  static absl::StatusOr<std::unique_ptr<ScalarLog>> Open(
      const std::string& path, int64_t keep_through_step);

  // Buffers one row of `cells` under `columns` (the header), the header
  // first when the file has none or another one. Cells are written as
  // given: no commas, no quoting.
  absl::Status Add(const std::vector<std::string>& columns,
                   const std::vector<std::string>& cells);
  absl::Status Flush() { return file_->Flush(); }
  bool pending() const { return file_->pending(); }
  // The rows Open kept.
  int64_t kept_rows() const { return kept_rows_; }

 private:
  ScalarLog(std::unique_ptr<AppendFile> file, std::string header,
            int64_t kept_rows)
      : file_(std::move(file)),
        header_(std::move(header)),
        kept_rows_(kept_rows) {}

  std::unique_ptr<AppendFile> file_;
  std::string header_;  // the file's header line with its "\n"; "" if none
  int64_t kept_rows_;
};

// "%.9g" of `v` (every float32 exactly, a double to 9 digits); "nan",
// "inf" or "-inf" when not finite.
std::string CsvNumber(double v);

}  // namespace cohort

#endif  // COHORT_WORKER_LOOP_SCALAR_LOG_H_

#include "worker/loop/scalar_log.h"

#include <cmath>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

// Far more than a long run's rows; the file is read whole to continue it.
constexpr int64_t kMaxLogBytes = int64_t{1} << 30;

// What of `text` a run after `keep_through_step` keeps: the header line
// and the complete rows whose step is at most keep_through_step, up to the
// first that is not.
struct Kept {
  std::string text;
  std::string header;
  int64_t rows = 0;
};

Kept KeepThrough(absl::string_view text, int64_t keep_through_step) {
  Kept kept;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    if (end == absl::string_view::npos) break;  // a torn last line
    const absl::string_view line = text.substr(at, end + 1 - at);
    if (at == 0) {
      kept.header = std::string(line);
    } else {
      int64_t step;
      if (!absl::SimpleAtoi(line.substr(0, line.find(',')), &step) ||
          step > keep_through_step) {
        break;
      }
      ++kept.rows;
    }
    at = end + 1;
  }
  kept.text = std::string(text.substr(0, at));
  return kept;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ScalarLog>> ScalarLog::Open(
    const std::string& path, int64_t keep_through_step) {
  absl::StatusOr<std::string> old =
      ReadRegularFile(path, kMaxLogBytes, "training log");
  if (!old.ok() && !absl::IsNotFound(old.status())) return old.status();
  Kept kept;
  if (old.ok()) {
    kept = KeepThrough(*old, keep_through_step);
    if (kept.text.size() != old->size()) {
      RETURN_IF_ERROR(WriteFileAtomically(path, kept.text));
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<AppendFile> file,
                   AppendFile::Open(path, /*exclusive=*/false));
  return std::unique_ptr<ScalarLog>(
      new ScalarLog(std::move(file), std::move(kept.header), kept.rows));
}

absl::Status ScalarLog::Add(const std::vector<std::string>& columns,
                            const std::vector<std::string>& cells) {
  const std::string header = absl::StrCat(absl::StrJoin(columns, ","), "\n");
  if (header_ != header) {
    if (!header_.empty()) {
      // Rows under other columns: this run's replace them. Whatever the old
      // file's descriptor still writes goes to the replaced file.
      RETURN_IF_ERROR(WriteFileAtomically(file_->path(), ""));
      ASSIGN_OR_RETURN(file_,
                       AppendFile::Open(file_->path(), /*exclusive=*/false));
    }
    file_->Append(header);
    header_ = header;
  }
  file_->Append(absl::StrCat(absl::StrJoin(cells, ","), "\n"));
  return absl::OkStatus();
}

std::string CsvNumber(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return absl::StrFormat("%.9g", v);
}

}  // namespace cohort

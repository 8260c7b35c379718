// The lines of a text file, plain or gzip-compressed, streamed through one
// fixed buffer: a file of any size is read with the same memory, unlike
// file_reader.h's whole-file reads.
//
// Thread safety: reentrant (no shared state); each call owns its buffer.
#ifndef COHORT_WORKER_DATA_LINE_READER_H_
#define COHORT_WORKER_DATA_LINE_READER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cohort {

// Lines handed to the callback are 1-based; a line's view lives only for
// the call.
using LineFn =
    absl::FunctionRef<absl::Status(absl::string_view line, int64_t number)>;

// Calls `fn` with each line of `path` in order, without its "\n" or
// "\r\n" (a last line without a newline counts; nothing follows a final
// newline), and stops at the first error `fn` returns, returning it. A file
// that starts with gzip's magic bytes is decompressed (its name does not
// matter; concatenated members are one stream), any other is read as it
// is. Errors name the file: its errno's status when it cannot be opened,
// InvalidArgument for a path that is not a regular file or a line longer
// than `max_line_bytes` (with its number), DataLoss for corrupt or
// truncated gzip data.
absl::Status ForEachLine(const std::string& path, size_t max_line_bytes,
                         LineFn fn);

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_LINE_READER_H_

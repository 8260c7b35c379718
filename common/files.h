// Whole-file reads and crash-safe writes.
//
// WriteFileAtomically writes to a temporary file beside the target, fsyncs
// it, renames it over the target and fsyncs the directory: a reader sees the
// old file or the new one, never a mix, even after a crash. Because a rename
// replaces whatever the name held, an output path that exists must be a
// regular file: a device (/dev/null), a FIFO, a socket, a directory or a
// symbolic link there is refused, never replaced. A symbolic link is refused
// rather than followed or replaced, since either would surprise someone (the
// link's owner, or the user who named it); name the file it points to.
//
// Readers open without blocking and check the file's type first, so a FIFO
// or a device under a file's name is refused (or, where a pipe is welcome,
// read with a deadline) instead of hanging the process.
//
// All functions are thread-safe for different paths.
#ifndef COHORT_COMMON_FILES_H_
#define COHORT_COMMON_FILES_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

// The contents of the file at `path`: a regular file, or a pipe (read as
// ReadRegularFile reads one). NotFound "PATH: no such file"; InvalidArgument
// for a directory, a device or a socket; Unavailable for other errors.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// The contents of the regular file at `path`, for small files a user names
// (a job spec). Refused before reading, with InvalidArgument naming `what`
// and the path: a directory, a device (/dev/zero), a FIFO (opened without
// waiting for a writer), a socket, or a file larger than `max_bytes` (also
// one that grows past it while being read). An open failure has the errno's
// code ("cannot open WHAT PATH: No such file or directory"); a read error
// is DataLoss.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path,
                                            int64_t max_bytes,
                                            absl::string_view what);

// Replaces (or creates) `path` with `contents`. INVALID_ARGUMENT, before
// anything is written, when `path` exists and is not a regular file
// (CheckOutputTarget); UNAVAILABLE naming the path and the errno text when
// the file system refuses.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents);

// OK when an output may be written at `path`: nothing is there, or a
// regular file is. INVALID_ARGUMENT otherwise, e.g. "cannot write /dev/null:
// it is a character device, not a regular file"; a symbolic link is refused
// without looking at what it points to.
absl::Status CheckOutputTarget(const std::string& path);

// Before a long run: whether WriteFileAtomically(path, ...) can succeed,
// i.e. CheckOutputTarget passes and a file can be created in the
// directory. Creates and removes a probe file; never touches `path`.
// INVALID_ARGUMENT naming the path and the reason.
absl::Status CheckCanWriteFile(const std::string& path);

// Whether `a` and `b` are the same file (device and inode, symbolic links
// followed, so "x.npy", "./x.npy", a link to it and a hard link all match).
// False when either does not exist.
bool SameFile(const std::string& a, const std::string& b);

// "a regular file", "a directory", "a FIFO", "a character device", "a block
// device", "a socket", "a symbolic link": what a file of `mode` (st_mode)
// is, for messages.
std::string FileTypeName(mode_t mode);

// The same for a directory files will be written into: creates it (and
// its parents) if needed, then probes it.
absl::Status CheckCanWriteDir(const std::string& dir);

}  // namespace cohort

#endif  // COHORT_COMMON_FILES_H_

#include "worker/data/line_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/quote.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

// zlib's own read buffer: large reads, few system calls.
constexpr unsigned kZlibBuffer = 256 * 1024;

// An open gzFile (transparent for plain files), closed on destruction.
class GzReader {
 public:
  static absl::StatusOr<GzReader> Open(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      return absl::ErrnoToStatus(err,
                                 absl::StrCat("cannot open ", QuoteName(path)));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat(QuoteName(path), " is not a regular file"));
    }
    gzFile gz = gzdopen(fd, "rb");
    if (gz == nullptr) {
      close(fd);
      return absl::ResourceExhaustedError(
          absl::StrCat("zlib cannot open ", QuoteName(path)));
    }
    gzbuffer(gz, kZlibBuffer);
    return GzReader(gz, path);
  }

  GzReader(GzReader&& other) : gz_(other.gz_), path_(other.path_) {
    other.gz_ = nullptr;
  }
  GzReader& operator=(GzReader&&) = delete;
  ~GzReader() {
    if (gz_ != nullptr) gzclose_r(gz_);
  }

  // Up to `n` bytes into `out`; 0 at the end of the file.
  absl::StatusOr<size_t> Read(char* out, size_t n) {
    const int got =
        gzread(gz_, out, static_cast<unsigned>(std::min<size_t>(n, INT_MAX)));
    int err = Z_OK;
    const char* why = gzerror(gz_, &err);
    // Z_BUF_ERROR: the input ended inside a gzip stream.
    if (got < 0 || (got == 0 && err == Z_BUF_ERROR)) {
      return absl::DataLossError(absl::StrCat(
          QuoteName(path_), ": ",
          err == Z_BUF_ERROR ? "truncated" : "corrupt or unreadable",
          " gzip data (zlib: ", why, ")"));
    }
    return static_cast<size_t>(got);
  }

 private:
  GzReader(gzFile gz, std::string path) : gz_(gz), path_(std::move(path)) {}

  gzFile gz_;
  std::string path_;
};

absl::string_view Line(const char* begin, const char* end) {
  if (end > begin && end[-1] == '\r') --end;
  return absl::string_view(begin, end - begin);
}

}  // namespace

absl::Status ForEachLine(const std::string& path, size_t max_line_bytes,
                         LineFn fn) {
  ASSIGN_OR_RETURN(GzReader reader, GzReader::Open(path));
  // One more byte than the longest line, for its newline.
  std::vector<char> buffer(max_line_bytes + 1);
  char* const buf = buffer.data();
  size_t begin = 0, end = 0;  // bytes read but not yet handed out
  int64_t number = 0;
  while (true) {
    const char* nl;
    while ((nl = static_cast<const char*>(
                std::memchr(buf + begin, '\n', end - begin))) != nullptr) {
      RETURN_IF_ERROR(fn(Line(buf + begin, nl), ++number));
      begin = nl - buf + 1;
    }
    std::memmove(buf, buf + begin, end - begin);
    end -= begin;
    begin = 0;
    if (end == buffer.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(QuoteName(path), ":", number + 1, ": longer than ",
                       max_line_bytes, " bytes (not a file of text lines?)"));
    }
    ASSIGN_OR_RETURN(const size_t got,
                     reader.Read(buf + end, buffer.size() - end));
    if (got == 0) break;
    end += got;
  }
  if (end > 0) RETURN_IF_ERROR(fn(Line(buf, buf + end), ++number));
  return absl::OkStatus();
}

}  // namespace cohort

#include "worker/data/file_reader.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/quote.h"

namespace cohort {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// zlib counts in 32-bit units; larger buffers are fed in pieces.
constexpr size_t kMaxChunk = size_t{1} << 30;

// The gzip trailer's ISIZE (uncompressed size mod 2^32), used only as a
// first guess for the output buffer.
size_t SizeHint(const std::vector<uint8_t>& gz) {
  const size_t n = gz.size();
  if (n < 18) return 64 * 1024;
  const size_t isize = size_t{gz[n - 4]} | (size_t{gz[n - 3]} << 8) |
                       (size_t{gz[n - 2]} << 16) | (size_t{gz[n - 1]} << 24);
  // Deflate never expands by more than ~1032x; anything else is a lie. A
  // large claim is only believed as far as the output actually grows.
  return std::clamp<size_t>(std::min(isize, n * 1100), 64 * 1024,
                            size_t{64} << 20);
}

bool HasGzipMagic(const uint8_t* p, size_t n) {
  return n >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

class Inflater {
 public:
  Inflater() { std::memset(&strm_, 0, sizeof(strm_)); }
  ~Inflater() {
    if (initialized_) inflateEnd(&strm_);
  }
  z_stream* strm() { return &strm_; }
  bool Init() {
    // 16 + MAX_WBITS: accept the gzip wrapper only (and check its CRC).
    initialized_ = inflateInit2(&strm_, 16 + MAX_WBITS) == Z_OK;
    return initialized_;
  }

 private:
  z_stream strm_;
  bool initialized_ = false;
};

}  // namespace

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::Status CheckDirReadable(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::OkStatus();
  }
  if (access(dir.c_str(), R_OK | X_OK) == 0) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("cannot read the data directory ", QuoteName(dir), ": ",
                   std::strerror(errno), " (check its permissions)."));
}

absl::StatusOr<std::vector<uint8_t>> ReadFileBytes(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (f == nullptr) {
    const int err = errno;
    const std::string why = absl::StrCat("cannot open ", QuoteName(path), ": ",
                                         std::strerror(err), ".");
    return err == ENOENT ? absl::NotFoundError(why)
                         : absl::PermissionDeniedError(why);
  }
  struct stat st;
  if (fstat(fileno(f.get()), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteName(path), " is not a regular file."));
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  const size_t got = std::fread(bytes.data(), 1, bytes.size(), f.get());
  if (got != bytes.size()) {
    return absl::DataLossError(absl::StrCat("error reading ", QuoteName(path),
                                            ": expected ", bytes.size(),
                                            " bytes, got ", got, "."));
  }
  return bytes;
}

absl::StatusOr<std::vector<uint8_t>> Gunzip(const std::vector<uint8_t>& gz,
                                            const std::string& path,
                                            const ExpectedSize& expected_size) {
  if (!HasGzipMagic(gz.data(), gz.size())) {
    return absl::DataLossError(absl::StrCat(
        QuoteName(path), " is not a gzip file (expected magic bytes 1f 8b)."));
  }
  Inflater inflater;
  if (!inflater.Init()) {
    return absl::ResourceExhaustedError("zlib could not initialise inflate.");
  }
  z_stream* s = inflater.strm();
  // With a header to read, start small: a file whose header already
  // disagrees with its size is refused before a large buffer is filled.
  std::vector<uint8_t> out(expected_size ? size_t{64} * 1024 : SizeHint(gz));
  size_t in_pos = 0, out_pos = 0;
  size_t limit = 0;  // the header's size plus one byte, once known
  while (true) {
    if (limit == 0 && expected_size) {
      const size_t want = expected_size(out.data(), out_pos);
      if (want > 0) {
        limit = want + 1;
        if (out.size() < limit) out.resize(std::min(limit, SizeHint(gz)));
      }
    }
    if (limit > 0 && out_pos >= limit) {
      return absl::DataLossError(
          absl::StrCat(QuoteName(path), " decompresses to more than the ",
                       limit - 1, " bytes its header implies; stopped there."));
    }
    if (out_pos == out.size()) {
      out.resize(limit > 0 ? std::min(limit, out.size() * 2) : out.size() * 2);
    }
    const size_t in_chunk = std::min(gz.size() - in_pos, kMaxChunk);
    const size_t out_chunk = std::min(out.size() - out_pos, kMaxChunk);
    s->next_in = const_cast<Bytef*>(gz.data() + in_pos);
    s->avail_in = static_cast<uInt>(in_chunk);
    s->next_out = out.data() + out_pos;
    s->avail_out = static_cast<uInt>(out_chunk);
    const int ret = inflate(s, Z_NO_FLUSH);
    in_pos += in_chunk - s->avail_in;
    out_pos += out_chunk - s->avail_out;
    if (ret == Z_STREAM_END) {
      // Concatenated members (as `cat a.gz b.gz` makes) are one stream.
      if (in_pos == gz.size()) break;
      if (!HasGzipMagic(gz.data() + in_pos, gz.size() - in_pos)) {
        return absl::DataLossError(
            absl::StrCat(QuoteName(path), " has ", gz.size() - in_pos,
                         " bytes of trailing garbage after its gzip data."));
      }
      inflateReset(s);
      continue;
    }
    if (ret == Z_DATA_ERROR || ret == Z_NEED_DICT || ret == Z_STREAM_ERROR) {
      return absl::DataLossError(
          absl::StrCat(QuoteName(path), " has corrupt gzip data (zlib: ",
                       s->msg != nullptr ? s->msg : "invalid data", ")."));
    }
    if (ret == Z_MEM_ERROR) {
      return absl::ResourceExhaustedError(
          absl::StrCat("out of memory decompressing ", QuoteName(path), "."));
    }
    // Z_OK or Z_BUF_ERROR: no more input before the end of the stream.
    if (in_pos == gz.size() && s->avail_out > 0) {
      return absl::DataLossError(absl::StrCat(
          QuoteName(path), " is a truncated gzip file (the stream ends after ",
          out_pos, " decompressed bytes without its end marker)."));
    }
  }
  out.resize(out_pos);
  return out;
}

absl::StatusOr<std::vector<uint8_t>> ReadMaybeGzipped(
    const std::string& path, const ExpectedSize& expected_size) {
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(path);
  if (!bytes.ok() || !absl::EndsWith(path, ".gz")) return bytes;
  return Gunzip(*bytes, path, expected_size);
}

}  // namespace cohort

// The on-disk format of checkpoint.h: encoding into an open file, and
// reading one file back with every length and CRC32C checked before it is
// trusted.
#include "common/checkpoint_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/crc32c.h"
#include "common/files.h"
#include "common/status_macros.h"

// Tensor bytes are copied to and from the file as they lie in memory.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the checkpoint format stores floats little-endian");
static_assert(sizeof(float) == 4, "the checkpoint format stores float32");

namespace cohort {
namespace checkpoint_internal {
namespace {

constexpr char kHeadMagic[8] = {'C', 'O', 'H', 'O', 'R', 'T', 'C', 'K'};
constexpr char kFootMagic[8] = {'C', 'O', 'H', 'O', 'R', 'T', 'E', 'N'};
constexpr uint32_t kFormatVersion = 1;
constexpr uint64_t kPreambleBytes = 16;  // magic, version, header length
constexpr uint64_t kCrcBytes = 4;
constexpr uint64_t kFooterBytes = 20;  // length, CRC, magic
constexpr uint64_t kMinFileBytes = kPreambleBytes + kCrcBytes + kFooterBytes;
// Keeps metadata and names "small": a header stays cheap to hold in memory.
constexpr size_t kMaxStringBytes = 1 << 20;
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 31;
// Largest single read(2)/write(2); Linux transfers at most ~2 GiB per call.
constexpr size_t kMaxIoBytes = size_t{1} << 30;
constexpr size_t kWriteBufferBytes = size_t{1} << 20;

// ---------------------------------------------------------------------------
// Encoding

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

void PutStr(std::string* out, absl::string_view s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out->append(s.data(), s.size());
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// Preamble, header body and header CRC. `crcs` holds each tensor's CRC32C.
std::string EncodeHeader(const Checkpoint& c,
                         const std::vector<uint32_t>& crcs) {
  std::string body;
  PutU64(&body, static_cast<uint64_t>(c.step));
  PutU64(&body, static_cast<uint64_t>(c.epoch));
  PutU64(&body, static_cast<uint64_t>(c.epoch_offset));
  PutU64(&body, c.generation);
  PutU64(&body, c.spec_hash);
  PutU32(&body, static_cast<uint32_t>(c.metadata.size()));
  for (const auto& [key, value] : c.metadata) {
    PutStr(&body, key);
    PutStr(&body, value);
  }
  PutU32(&body, static_cast<uint32_t>(c.tensors.size()));
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const CheckpointTensor& t = c.tensors[i];
    PutStr(&body, t.name);
    PutU32(&body, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) PutU64(&body, static_cast<uint64_t>(d));
    PutU64(&body, uint64_t{t.values.size()} * sizeof(float));
    PutU32(&body, crcs[i]);
  }
  std::string out(kHeadMagic, sizeof(kHeadMagic));
  PutU32(&out, kFormatVersion);
  PutU32(&out, static_cast<uint32_t>(body.size()));
  out += body;
  PutU32(&out, Crc32c(out.data(), out.size()));
  return out;
}

// ---------------------------------------------------------------------------
// Writing

// Buffered writes to one file that keep a running CRC32C and length.
// Single-threaded; does not own the descriptor.
class FileWriter {
 public:
  FileWriter(int fd, const std::string& path) : fd_(fd), path_(path) {}

  absl::Status Append(const void* data, size_t n) {
    crc_ = Crc32c(data, n, crc_);
    length_ += n;
    if (buffer_.size() + n > kWriteBufferBytes) RETURN_IF_ERROR(Flush());
    if (n >= kWriteBufferBytes) return WriteAll(data, n);
    buffer_.append(static_cast<const char*>(data), n);
    return absl::OkStatus();
  }

  absl::Status Flush() {
    RETURN_IF_ERROR(WriteAll(buffer_.data(), buffer_.size()));
    buffer_.clear();
    return absl::OkStatus();
  }

  uint32_t crc() const { return crc_; }
  uint64_t length() const { return length_; }

 private:
  absl::Status WriteAll(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = write(fd_, p, std::min(n, kMaxIoBytes));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return ErrnoError("write", path_, w < 0 ? errno : ENOSPC);
      p += w;
      n -= static_cast<size_t>(w);
    }
    return absl::OkStatus();
  }

  const int fd_;
  const std::string& path_;
  std::string buffer_;
  uint32_t crc_ = 0;
  uint64_t length_ = 0;
};

// ---------------------------------------------------------------------------
// Reading. Errors here carry only the reason; ReadCheckpointFile adds the
// path.

absl::Status DataLoss(absl::string_view reason) {
  return absl::DataLossError(reason);
}

absl::Status PreadAll(int fd, uint64_t offset, void* dst, size_t n) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r =
        pread(fd, p, std::min(n, kMaxIoBytes), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot read: ", std::strerror(errno)));
    }
    if (r == 0) return DataLoss("file shrank while being read");
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return absl::OkStatus();
}

// Bounds-checked cursor over the header body.
class HeaderParser {
 public:
  explicit HeaderParser(absl::string_view body) : rest_(body) {}

  absl::Status U32(absl::string_view what, uint32_t* v) {
    RETURN_IF_ERROR(Need(what, 4));
    *v = GetU32(rest_.data());
    rest_.remove_prefix(4);
    return absl::OkStatus();
  }
  absl::Status U64(absl::string_view what, uint64_t* v) {
    RETURN_IF_ERROR(Need(what, 8));
    *v = GetU64(rest_.data());
    rest_.remove_prefix(8);
    return absl::OkStatus();
  }
  absl::Status I64(absl::string_view what, int64_t* v) {
    uint64_t u = 0;
    RETURN_IF_ERROR(U64(what, &u));
    *v = static_cast<int64_t>(u);
    return absl::OkStatus();
  }
  absl::Status Str(absl::string_view what, std::string* s) {
    uint32_t n = 0;
    RETURN_IF_ERROR(U32(what, &n));
    RETURN_IF_ERROR(Need(what, n));
    s->assign(rest_.data(), n);
    rest_.remove_prefix(n);
    return absl::OkStatus();
  }
  // A count of entries that each take at least `min_entry_bytes`, checked
  // against the bytes left so that it can size a reservation.
  absl::Status Count(absl::string_view what, size_t min_entry_bytes,
                     uint32_t* n) {
    RETURN_IF_ERROR(U32(what, n));
    if (*n > rest_.size() / min_entry_bytes) {
      return DataLoss(absl::StrCat("header declares ", *n, " ", what,
                                   " but has room for at most ",
                                   rest_.size() / min_entry_bytes));
    }
    return absl::OkStatus();
  }
  size_t left() const { return rest_.size(); }

 private:
  absl::Status Need(absl::string_view what, size_t n) const {
    if (n <= rest_.size()) return absl::OkStatus();
    return DataLoss(absl::StrCat("header ends inside ", what, " (needs ", n,
                                 " bytes, ", rest_.size(), " left)"));
  }
  absl::string_view rest_;
};

struct TensorEntry {
  uint64_t bytes = 0;
  uint32_t crc = 0;
};

absl::Status CheckShape(const CheckpointTensor& t, uint64_t bytes) {
  if (bytes % sizeof(float) != 0) {
    return DataLoss(absl::StrCat("tensor '", t.name, "' has ", bytes,
                                 " bytes, not a multiple of 4"));
  }
  const uint64_t want = bytes / sizeof(float);
  uint64_t elements = 1;
  bool zero = false;
  for (int64_t d : t.shape) {
    if (d < 0) {
      return DataLoss(
          absl::StrCat("tensor '", t.name, "' has negative dimension ", d));
    }
    if (d == 0) zero = true;
    // Saturate above `want`: the product only has to be compared to it.
    elements = (d != 0 && elements > want / static_cast<uint64_t>(d))
                   ? want + 1
                   : elements * static_cast<uint64_t>(d);
  }
  if (zero) elements = 0;
  if (elements != want) {
    return DataLoss(absl::StrCat("tensor '", t.name, "' shape [",
                                 absl::StrJoin(t.shape, ","), "] does not fit ",
                                 bytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status ParseHeader(absl::string_view body, Checkpoint* c,
                         std::vector<TensorEntry>* entries) {
  HeaderParser p(body);
  RETURN_IF_ERROR(p.I64("step", &c->step));
  RETURN_IF_ERROR(p.I64("epoch", &c->epoch));
  RETURN_IF_ERROR(p.I64("epoch_offset", &c->epoch_offset));
  RETURN_IF_ERROR(p.U64("generation", &c->generation));
  RETURN_IF_ERROR(p.U64("spec_hash", &c->spec_hash));
  uint32_t n = 0;
  RETURN_IF_ERROR(p.Count("metadata entries", 8, &n));
  for (uint32_t i = 0; i < n; ++i) {
    std::string key, value;
    RETURN_IF_ERROR(p.Str("metadata key", &key));
    RETURN_IF_ERROR(p.Str("metadata value", &value));
    if (!c->metadata.emplace(std::move(key), std::move(value)).second) {
      return DataLoss("metadata key appears twice");
    }
  }
  constexpr size_t kMinTensorEntry = 4 + 4 + 8 + 4;
  RETURN_IF_ERROR(p.Count("tensors", kMinTensorEntry, &n));
  c->tensors.resize(n);
  entries->resize(n);
  std::set<std::string> names;
  for (uint32_t i = 0; i < n; ++i) {
    CheckpointTensor& t = c->tensors[i];
    RETURN_IF_ERROR(p.Str("tensor name", &t.name));
    if (!names.insert(t.name).second) {
      return DataLoss(absl::StrCat("tensor '", t.name, "' appears twice"));
    }
    uint32_t rank = 0;
    RETURN_IF_ERROR(p.Count("dimensions", 8, &rank));
    t.shape.resize(rank);
    for (int64_t& d : t.shape) RETURN_IF_ERROR(p.I64("dimension", &d));
    RETURN_IF_ERROR(p.U64("tensor byte length", &(*entries)[i].bytes));
    RETURN_IF_ERROR(p.U32("tensor CRC32C", &(*entries)[i].crc));
    RETURN_IF_ERROR(CheckShape(t, (*entries)[i].bytes));
  }
  if (p.left() != 0) {
    return DataLoss(
        absl::StrCat("header has ", p.left(), " bytes after the tensor table"));
  }
  return absl::OkStatus();
}

// Checks that the declared tensor sizes fill the data region exactly; this
// runs before any tensor buffer is allocated.
absl::Status CheckDataLength(const Checkpoint& c,
                             const std::vector<TensorEntry>& entries,
                             uint64_t data_bytes, uint64_t file_bytes) {
  uint64_t left = data_bytes;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].bytes > left) {
      return DataLoss(absl::StrCat("tensor '", c.tensors[i].name, "' declares ",
                                   entries[i].bytes, " bytes but only ", left,
                                   " bytes of data remain in the ", file_bytes,
                                   "-byte file"));
    }
    left -= entries[i].bytes;
  }
  if (left != 0) {
    return DataLoss(absl::StrCat("tensors hold ", data_bytes - left,
                                 " bytes but the file has ", data_bytes,
                                 " bytes of tensor data"));
  }
  return absl::OkStatus();
}

absl::Status CheckFooter(const char* footer, uint64_t file_bytes,
                         uint32_t* file_crc) {
  if (std::memcmp(footer + 12, kFootMagic, sizeof(kFootMagic)) != 0) {
    return DataLoss("footer magic is not COHORTEN (truncated or damaged)");
  }
  const uint64_t length = GetU64(footer);
  if (length != file_bytes) {
    return DataLoss(absl::StrCat("footer says the file is ", length,
                                 " bytes but it is ", file_bytes));
  }
  *file_crc = GetU32(footer + 8);
  return absl::OkStatus();
}

// The size of the open file, which must be a regular file large enough to
// hold an empty checkpoint.
absl::StatusOr<uint64_t> CheckedFileSize(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot stat: ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return DataLoss(
        absl::StrCat(FileTypeName(st.st_mode), ", not a regular file"));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kMinFileBytes) {
    return DataLoss(absl::StrCat("file is ", size,
                                 " bytes, shorter than any checkpoint (",
                                 kMinFileBytes, ")"));
  }
  return size;
}

// Checks the magic and version and returns the header body's length, which
// fits in the `size`-byte file.
absl::StatusOr<uint64_t> ReadPreamble(int fd, uint64_t size) {
  char preamble[kPreambleBytes];
  RETURN_IF_ERROR(PreadAll(fd, 0, preamble, sizeof(preamble)));
  if (std::memcmp(preamble, kHeadMagic, sizeof(kHeadMagic)) != 0) {
    return DataLoss("not a cohort checkpoint (magic is not COHORTCK)");
  }
  const uint32_t version = GetU32(preamble + 8);
  if (version != kFormatVersion) {
    return DataLoss(absl::StrCat("format version ", version,
                                 ", this build reads version ",
                                 kFormatVersion));
  }
  const uint64_t header_bytes = GetU32(preamble + 12);
  if (header_bytes > size - kMinFileBytes || header_bytes > kMaxHeaderBytes) {
    return DataLoss(absl::StrCat("header length ", header_bytes,
                                 " does not fit in the ", size, "-byte file"));
  }
  return header_bytes;
}

// Preamble, header body and header CRC, the CRC verified.
absl::StatusOr<std::string> ReadHeader(int fd, uint64_t header_bytes) {
  // Bounded by the real file size, checked by ReadPreamble.
  std::string header(kPreambleBytes + header_bytes + kCrcBytes, '\0');
  RETURN_IF_ERROR(PreadAll(fd, 0, header.data(), header.size()));
  const size_t crc_at = header.size() - kCrcBytes;
  const uint32_t stored = GetU32(header.data() + crc_at);
  const uint32_t computed = Crc32c(header.data(), crc_at);
  if (stored != computed) {
    return DataLoss(
        absl::StrFormat("header CRC32C mismatch (stored %08x, "
                        "computed %08x)",
                        stored, computed));
  }
  return header;
}

// Reads the tensors of c->tensors (sized by ParseHeader) from just after
// `header`, checking each one's CRC32C and then the whole file's against
// `file_crc`, the footer's.
absl::Status ReadTensors(int fd, const std::string& header,
                         const std::vector<TensorEntry>& entries,
                         uint32_t file_crc, Checkpoint* c) {
  uint32_t running = Crc32c(header.data(), header.size());
  uint64_t offset = header.size();
  for (size_t i = 0; i < entries.size(); ++i) {
    CheckpointTensor& t = c->tensors[i];
    t.values.resize(entries[i].bytes / sizeof(float));  // fits, checked
    RETURN_IF_ERROR(PreadAll(fd, offset, t.values.data(), entries[i].bytes));
    const uint32_t crc = Crc32c(t.values.data(), entries[i].bytes);
    if (crc != entries[i].crc) {
      return DataLoss(absl::StrFormat(
          "tensor '%s' CRC32C mismatch (stored %08x, computed %08x)", t.name,
          entries[i].crc, crc));
    }
    running = Crc32c(t.values.data(), entries[i].bytes, running);
    offset += entries[i].bytes;
  }
  if (running != file_crc) {
    return DataLoss(
        absl::StrFormat("file CRC32C mismatch (stored %08x, computed %08x)",
                        file_crc, running));
  }
  return absl::OkStatus();
}

}  // namespace

// ---------------------------------------------------------------------------
// What checkpoint_format.h exports to checkpoint.cc

absl::Status ValidateForWrite(const Checkpoint& c) {
  if (c.step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint step ", c.step, " is negative"));
  }
  for (const auto& [key, value] : c.metadata) {
    if (key.size() > kMaxStringBytes || value.size() > kMaxStringBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint metadata '", key.substr(0, 64), "' is over ",
                       kMaxStringBytes, " bytes"));
    }
  }
  std::set<absl::string_view> names;
  for (const CheckpointTensor& t : c.tensors) {
    if (t.name.size() > kMaxStringBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint tensor name '", t.name.substr(0, 64),
                       "...' is over ", kMaxStringBytes, " bytes"));
    }
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint tensor '", t.name, "' appears twice"));
    }
    uint64_t elements = 1;
    for (int64_t d : t.shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "checkpoint tensor '", t.name, "' has negative dimension ", d));
      }
      elements = (d == 0 || elements <= t.values.size() / d)
                     ? elements * d
                     : t.values.size() + 1;  // overflow: cannot match
    }
    if (elements != t.values.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint tensor '", t.name, "' has ", t.values.size(),
                       " values, its shape needs ",
                       elements > t.values.size() ? "more" : "fewer"));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteContents(int fd, const std::string& path,
                           const Checkpoint& c) {
  std::vector<uint32_t> crcs;
  crcs.reserve(c.tensors.size());
  for (const CheckpointTensor& t : c.tensors) {
    crcs.push_back(Crc32c(t.values.data(), t.values.size() * sizeof(float)));
  }
  FileWriter w(fd, path);
  const std::string header = EncodeHeader(c, crcs);
  RETURN_IF_ERROR(w.Append(header.data(), header.size()));
  for (const CheckpointTensor& t : c.tensors) {
    RETURN_IF_ERROR(w.Append(t.values.data(), t.values.size() * sizeof(float)));
  }
  std::string footer;
  PutU64(&footer, w.length() + kFooterBytes);
  PutU32(&footer, w.crc());
  footer.append(kFootMagic, sizeof(kFootMagic));
  RETURN_IF_ERROR(w.Append(footer.data(), footer.size()));
  return w.Flush();
}

absl::StatusOr<Checkpoint> ReadVerified(const std::string& path) {
  // Without O_NONBLOCK a FIFO under a checkpoint's name would block the
  // open until a writer came; CheckedFileSize then refuses it. Regular
  // files ignore the flag.
  ScopedFd fd(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return absl::NotFoundError("no such file");
    return absl::UnavailableError(
        absl::StrCat("cannot open: ", std::strerror(errno)));
  }
  ASSIGN_OR_RETURN(const uint64_t size, CheckedFileSize(fd.get()));
  ASSIGN_OR_RETURN(const uint64_t header_bytes, ReadPreamble(fd.get(), size));
  ASSIGN_OR_RETURN(const std::string header,
                   ReadHeader(fd.get(), header_bytes));

  Checkpoint c;
  std::vector<TensorEntry> entries;
  RETURN_IF_ERROR(ParseHeader(
      absl::string_view(header).substr(kPreambleBytes, header_bytes), &c,
      &entries));
  const uint64_t data_bytes = size - header.size() - kFooterBytes;
  RETURN_IF_ERROR(CheckDataLength(c, entries, data_bytes, size));

  char footer[kFooterBytes];
  RETURN_IF_ERROR(
      PreadAll(fd.get(), size - kFooterBytes, footer, sizeof(footer)));
  uint32_t file_crc = 0;
  RETURN_IF_ERROR(CheckFooter(footer, size, &file_crc));
  RETURN_IF_ERROR(ReadTensors(fd.get(), header, entries, file_crc, &c));
  return c;
}

}  // namespace checkpoint_internal
}  // namespace cohort

#include "worker/data/zip_index.h"

#include <algorithm>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/quote.h"

namespace cohort {
namespace {

constexpr uint32_t kEndRecord = 0x06054b50;
constexpr uint32_t kZip64EndRecord = 0x06064b50;
constexpr uint32_t kZip64Locator = 0x07064b50;
constexpr uint32_t kCentralEntry = 0x02014b50;
constexpr uint32_t kLocalHeader = 0x04034b50;

absl::Status Malformed(const std::string& path, absl::string_view why) {
  return absl::DataLossError(
      absl::StrCat(QuoteName(path), ": not a valid .npz (ZIP) archive: ", why));
}

// Little-endian fields at `at`; the caller has checked the bounds.
uint64_t Read(absl::string_view b, int64_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    v = v << 8 | static_cast<unsigned char>(b[at + i]);
  }
  return v;
}

bool Fits(absl::string_view b, uint64_t at, uint64_t len) {
  return at <= b.size() && len <= b.size() - at;
}

struct Directory {
  uint64_t entries = 0, offset = 0, size = 0;
};

// The central directory's place, from the end record (and its ZIP64
// record when a field overflowed).
absl::StatusOr<Directory> FindDirectory(absl::string_view b,
                                        const std::string& path) {
  if (b.size() < 22) return Malformed(path, "shorter than a ZIP end record");
  // The end record is the last 22 bytes plus a comment of up to 64 KiB.
  const int64_t lowest = std::max<int64_t>(0, b.size() - 22 - 0xffff);
  int64_t end = -1;
  for (int64_t at = b.size() - 22; at >= lowest; --at) {
    if (Read(b, at, 4) == kEndRecord) {
      end = at;
      break;
    }
  }
  if (end < 0) return Malformed(path, "no end-of-directory record");
  Directory d{Read(b, end + 10, 2), Read(b, end + 16, 4), Read(b, end + 12, 4)};
  if (d.entries != 0xffff && d.offset != 0xffffffff && d.size != 0xffffffff) {
    return d;
  }
  if (end < 20 || Read(b, end - 20, 4) != kZip64Locator) {
    return Malformed(path, "a ZIP64 archive without its locator");
  }
  const uint64_t record = Read(b, end - 20 + 8, 8);
  if (!Fits(b, record, 56) || Read(b, record, 4) != kZip64EndRecord) {
    return Malformed(path, "the ZIP64 end record is missing");
  }
  return Directory{Read(b, record + 32, 8), Read(b, record + 48, 8),
                   Read(b, record + 40, 8)};
}

// Replaces the 32-bit fields that overflowed with the ZIP64 extra field's
// values, in the order the format gives them.
absl::Status ApplyZip64(absl::string_view extra, uint64_t* size,
                        uint64_t* compressed, uint64_t* offset,
                        const std::string& path) {
  for (uint64_t at = 0; at + 4 <= extra.size();) {
    const uint64_t id = Read(extra, at, 2), len = Read(extra, at + 2, 2);
    if (!Fits(extra, at + 4, len)) break;
    if (id == 1) {
      uint64_t p = at + 4;
      for (uint64_t* field : {size, compressed, offset}) {
        if (*field != 0xffffffff) continue;
        if (p + 8 > at + 4 + len) return Malformed(path, "short ZIP64 field");
        *field = Read(extra, p, 8);
        p += 8;
      }
      return absl::OkStatus();
    }
    at += 4 + len;
  }
  if (*size == 0xffffffff || *compressed == 0xffffffff ||
      *offset == 0xffffffff) {
    return Malformed(path, "a member's ZIP64 sizes are missing");
  }
  return absl::OkStatus();
}

// Entry at `*at` of the central directory; advances *at past it.
absl::StatusOr<ZipMember> ReadEntry(absl::string_view b, uint64_t* at,
                                    uint64_t end, const std::string& path) {
  const uint64_t e = *at;
  if (e + 46 > end || Read(b, e, 4) != kCentralEntry) {
    return Malformed(path, "a damaged central directory");
  }
  const uint64_t name_len = Read(b, e + 28, 2), extra_len = Read(b, e + 30, 2),
                 comment_len = Read(b, e + 32, 2);
  if (e + 46 + name_len + extra_len + comment_len > end) {
    return Malformed(path, "a directory entry runs past the directory");
  }
  ZipMember m;
  m.name = std::string(b.substr(e + 46, name_len));
  m.encrypted = (Read(b, e + 8, 2) & 1) != 0;
  m.stored = Read(b, e + 10, 2) == 0;
  uint64_t compressed = Read(b, e + 20, 4), size = Read(b, e + 24, 4),
           local = Read(b, e + 42, 4);
  if (absl::Status s = ApplyZip64(b.substr(e + 46 + name_len, extra_len), &size,
                                  &compressed, &local, path);
      !s.ok()) {
    return s;
  }
  *at = e + 46 + name_len + extra_len + comment_len;
  if (!Fits(b, local, 30) || Read(b, local, 4) != kLocalHeader) {
    return Malformed(path, absl::StrCat("member ", QuoteName(m.name),
                                        " has no local header"));
  }
  const uint64_t data =
      local + 30 + Read(b, local + 26, 2) + Read(b, local + 28, 2);
  if (!Fits(b, data, compressed)) {
    return Malformed(path, absl::StrCat("member ", QuoteName(m.name),
                                        " runs past the end of the file"));
  }
  m.offset = static_cast<int64_t>(data);
  m.size = static_cast<int64_t>(size);
  m.compressed_size = static_cast<int64_t>(compressed);
  if (m.stored && m.size != m.compressed_size) {
    return Malformed(path, absl::StrCat("stored member ", QuoteName(m.name),
                                        " has two different sizes"));
  }
  return m;
}

}  // namespace

absl::StatusOr<std::vector<ZipMember>> ReadZipIndex(absl::string_view b,
                                                    const std::string& path) {
  absl::StatusOr<Directory> d = FindDirectory(b, path);
  if (!d.ok()) return d.status();
  if (!Fits(b, d->offset, d->size)) {
    return Malformed(path, "the central directory lies outside the file");
  }
  // Every entry takes at least 46 bytes: a count beyond that is a lie.
  if (d->entries > d->size / 46) {
    return Malformed(path, "more entries than the directory can hold");
  }
  std::vector<ZipMember> members;
  absl::flat_hash_set<std::string> names;
  uint64_t at = d->offset;
  for (uint64_t i = 0; i < d->entries; ++i) {
    absl::StatusOr<ZipMember> m = ReadEntry(b, &at, d->offset + d->size, path);
    if (!m.ok()) return m.status();
    // Readers disagree on which of two members of one name is meant
    // (NumPy's np.load takes the last): neither is guessed.
    if (!names.insert(m->name).second) {
      return Malformed(
          path, absl::StrCat("two members are named ", QuoteName(m->name)));
    }
    members.push_back(*std::move(m));
  }
  return members;
}

}  // namespace cohort

#include "worker/data/npy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "worker/data/mapped_file.h"
#include "worker/data/zip_index.h"

namespace cohort {
namespace {

constexpr absl::string_view kMagic = "\x93NUMPY";
// NumPy writes a few hundred bytes of header for a plain dtype (its own
// reader refuses more than 10,000 unless told otherwise); a header of
// megabytes would only be parsed for nothing.
constexpr int64_t kMaxHeaderBytes = 64 << 10;

absl::Status Malformed(const std::string& path, absl::string_view why) {
  return absl::DataLossError(
      absl::StrCat(QuoteName(path), ": not a valid .npy file: ", why));
}

// The three entries of the header dict, as the text of each value.
struct HeaderDict {
  absl::string_view descr, fortran_order, shape;
};

// The length of the Python literal at the start of `r` (a quoted string,
// a tuple or list, True or False), or 0 when there is none or it does not
// end.
size_t LiteralLength(absl::string_view r) {
  int depth = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    const char c = r[i];
    if (c == '\'' || c == '"') {
      i = r.find(c, i + 1);
      if (i == absl::string_view::npos) return 0;
      if (depth == 0) return i + 1;
    } else if (c == '(' || c == '[') {
      ++depth;
    } else if (c == ')' || c == ']') {
      if (--depth < 0) return 0;
      if (depth == 0) return i + 1;
    } else if (depth == 0 && (c == ',' || c == '}' || absl::ascii_isspace(c))) {
      return i;
    }
  }
  return depth == 0 ? r.size() : 0;
}

// A header key: a quoted name, as Python writes it.
absl::StatusOr<absl::string_view> DictKey(absl::string_view* rest,
                                          const std::string& path) {
  const absl::string_view r = *rest;
  const size_t end = r.empty() || (r[0] != '\'' && r[0] != '"')
                         ? absl::string_view::npos
                         : r.find(r[0], 1);
  if (end == absl::string_view::npos) {
    return Malformed(path, "its header dict has a key that is not a string");
  }
  rest->remove_prefix(end + 1);
  return r.substr(1, end - 1);
}

// Where a key's value goes; nullptr for a key NumPy does not write (it
// refuses such headers too).
absl::string_view* Slot(HeaderDict* d, absl::string_view key) {
  if (key == "descr") return &d->descr;
  if (key == "fortran_order") return &d->fortran_order;
  if (key == "shape") return &d->shape;
  return nullptr;
}

// The header dict, "{'descr': '<f4', 'fortran_order': False, 'shape':
// (3,), }", read entry by entry: every key once (NumPy's reader keeps the
// last of two, which would make the two readers see different arrays).
absl::StatusOr<HeaderDict> ParseDict(absl::string_view text,
                                     const std::string& path) {
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(text);
  if (rest.empty() || rest[0] != '{') {
    return Malformed(path, "its header is not a dict");
  }
  rest = absl::StripLeadingAsciiWhitespace(rest.substr(1));
  HeaderDict d;
  while (!rest.empty() && rest[0] != '}') {
    ASSIGN_OR_RETURN(const absl::string_view key, DictKey(&rest, path));
    absl::string_view* slot = Slot(&d, key);
    if (slot == nullptr) {
      return Malformed(path, absl::StrCat("its header has an unknown key '",
                                          EscapeText(key, 100), "'"));
    }
    if (!slot->empty()) {
      return Malformed(
          path, absl::StrCat("its header has the key '", key, "' twice"));
    }
    rest = absl::StripLeadingAsciiWhitespace(rest);
    if (rest.empty() || rest[0] != ':') {
      return Malformed(path, absl::StrCat("no ':' after '", key, "'"));
    }
    rest = absl::StripLeadingAsciiWhitespace(rest.substr(1));
    const size_t length = LiteralLength(rest);
    if (length == 0) {
      return Malformed(path, absl::StrCat("the value of '", key,
                                          "' in its header is missing or not "
                                          "terminated"));
    }
    *slot = rest.substr(0, length);
    rest.remove_prefix(length);
    rest = absl::StripLeadingAsciiWhitespace(rest);
    if (!rest.empty() && rest[0] == ',') {
      rest = absl::StripLeadingAsciiWhitespace(rest.substr(1));
    } else if (rest.empty() || rest[0] != '}') {
      return Malformed(path, absl::StrCat("no ',' after the value of '", key,
                                          "' in its header"));
    }
  }
  if (rest.empty() || !absl::StripAsciiWhitespace(rest.substr(1)).empty()) {
    return Malformed(path, "its header dict is not closed by '}'");
  }
  for (const char* key : {"descr", "fortran_order", "shape"}) {
    if (Slot(&d, key)->empty()) {
      return Malformed(path, absl::StrCat("its header has no '", key, "'"));
    }
  }
  return d;
}

absl::StatusOr<NpyType> ParseDescr(absl::string_view value,
                                   const std::string& path) {
  if (value.empty() || (value[0] != '\'' && value[0] != '"')) {
    return Malformed(path, "'descr' is not a string");
  }
  const size_t end = value.find(value[0], 1);
  if (end == absl::string_view::npos) {
    return Malformed(path, "'descr' is not terminated");
  }
  const absl::string_view descr = value.substr(1, end - 1);
  if (descr.size() < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteName(path), ": dtype '", EscapeText(descr, 100),
                     "' is not supported (structured or odd)"));
  }
  const char order = descr[0];
  const absl::string_view code = descr.substr(1);
  struct Known {
    absl::string_view code;
    NpyType type;
  };
  constexpr Known kKnown[] = {
      {"f4", NpyType::kFloat32}, {"f2", NpyType::kFloat16},
      {"u1", NpyType::kUint8},   {"i4", NpyType::kInt32},
      {"i8", NpyType::kInt64},   {"u2", NpyType::kUint16},
      {"u4", NpyType::kUint32}};
  for (const Known& k : kKnown) {
    if (code != k.code) continue;
    const bool single_byte = k.type == NpyType::kUint8;
    if (order == '>' && !single_byte) {
      return absl::InvalidArgumentError(
          absl::StrCat(QuoteName(path), ": dtype '", descr,
                       "' is big-endian; save it little-endian "
                       "(array.astype('<",
                       code, "'))"));
    }
    if (order == '<' || order == '=' || order == '|' || single_byte) {
      return k.type;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(QuoteName(path), ": dtype '", EscapeText(descr, 100),
                   "' is not supported (float32, float16, uint8, uint16, "
                   "uint32, int32 or int64)"));
}

absl::StatusOr<std::vector<int64_t>> ParseShape(absl::string_view value,
                                                const std::string& path) {
  if (value.empty() || value[0] != '(') {
    return Malformed(path, "'shape' is not a tuple");
  }
  const size_t end = value.find(')');
  if (end == absl::string_view::npos) {
    return Malformed(path, "'shape' is not terminated");
  }
  std::vector<int64_t> shape;
  for (absl::string_view part :
       absl::StrSplit(value.substr(1, end - 1), ',', absl::SkipWhitespace())) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &d) || d < 0) {
      return Malformed(
          path,
          absl::StrCat("'shape' has a bad dimension '",
                       EscapeText(absl::StripAsciiWhitespace(part), 100), "'"));
    }
    shape.push_back(d);
  }
  return shape;
}

// The header's length field and where the dict starts.
absl::Status ParsePreamble(absl::string_view bytes, const std::string& path,
                           int64_t* dict_start, int64_t* dict_bytes) {
  if (bytes.size() < 10 || bytes.substr(0, kMagic.size()) != kMagic) {
    return Malformed(path, "it does not start with \\x93NUMPY");
  }
  const auto byte = [&](size_t i) {
    return static_cast<int64_t>(static_cast<uint8_t>(bytes[i]));
  };
  const int major = static_cast<int>(byte(6));
  if (major == 1) {
    *dict_start = 10;
    *dict_bytes = byte(8) | byte(9) << 8;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return Malformed(path, "its header is truncated");
    *dict_start = 12;
    *dict_bytes = byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteName(path), ": .npy format version ", major,
                     " is not supported (1, 2 or 3)"));
  }
  if (*dict_bytes > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        QuoteName(path), ": its header is ", *dict_bytes,
        " bytes, larger than the ", kMaxHeaderBytes,
        " this reader accepts (NumPy writes a few hundred for the dtypes "
        "cohort reads)"));
  }
  if (*dict_start + *dict_bytes > static_cast<int64_t>(bytes.size())) {
    return Malformed(path, "its header is truncated");
  }
  return absl::OkStatus();
}

}  // namespace

const char* NpyTypeName(NpyType type) {
  switch (type) {
    case NpyType::kFloat32:
      return "float32";
    case NpyType::kFloat16:
      return "float16";
    case NpyType::kUint8:
      return "uint8";
    case NpyType::kInt32:
      return "int32";
    case NpyType::kInt64:
      return "int64";
    case NpyType::kUint16:
      return "uint16";
    case NpyType::kUint32:
      return "uint32";
  }
  return "?";
}

int NpyItemBytes(NpyType type) {
  switch (type) {
    case NpyType::kFloat32:
    case NpyType::kInt32:
    case NpyType::kUint32:
      return 4;
    case NpyType::kFloat16:
    case NpyType::kUint16:
      return 2;
    case NpyType::kUint8:
      return 1;
    case NpyType::kInt64:
      return 8;
  }
  return 1;
}

absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view bytes,
                                         const std::string& path) {
  int64_t dict_start = 0, dict_bytes = 0;
  RETURN_IF_ERROR(ParsePreamble(bytes, path, &dict_start, &dict_bytes));
  const absl::string_view dict = bytes.substr(dict_start, dict_bytes);
  ASSIGN_OR_RETURN(const HeaderDict entries, ParseDict(dict, path));
  NpyHeader h;
  ASSIGN_OR_RETURN(h.type, ParseDescr(entries.descr, path));
  if (entries.fortran_order == "True") {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteName(path),
                     ": the array is in Fortran order; save it in C order "
                     "(numpy.ascontiguousarray)"));
  }
  if (entries.fortran_order != "False") {
    return Malformed(path, "'fortran_order' is neither True nor False");
  }
  ASSIGN_OR_RETURN(h.shape, ParseShape(entries.shape, path));
  h.data_offset = dict_start + dict_bytes;
  int64_t n = NpyItemBytes(h.type);
  for (int64_t d : h.shape) {
    if (__builtin_mul_overflow(n, d, &n)) {
      return Malformed(path,
                       absl::StrCat("shape (", absl::StrJoin(h.shape, ", "),
                                    ") is too large"));
    }
  }
  h.data_bytes = n;
  return h;
}

namespace {

// The header of the array that fills `bytes` exactly (a file, or an
// archive member), named `path`.
absl::StatusOr<NpyHeader> WholeArrayHeader(absl::string_view bytes,
                                           const std::string& path) {
  ASSIGN_OR_RETURN(NpyHeader header,
                   ParseNpyHeader(bytes.substr(0, kMaxHeaderBytes + 12), path));
  const int64_t want = header.data_offset + header.data_bytes;
  const int64_t size = static_cast<int64_t>(bytes.size());
  if (size != want) {
    return absl::DataLossError(
        absl::StrCat(QuoteName(path), ": ", size, " bytes where its header (",
                     NpyTypeName(header.type), ", shape (",
                     absl::StrJoin(header.shape, ", "), ")) implies ", want,
                     size < want ? " (truncated)" : " (trailing bytes)"));
  }
  return header;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NpyArray>> NpyArray::Open(
    const std::string& path) {
  MappedFile file;
  RETURN_IF_ERROR(file.Map(path));
  ASSIGN_OR_RETURN(NpyHeader header, WholeArrayHeader(file.view(), path));
  std::unique_ptr<NpyArray> array(
      new NpyArray(path, std::move(header), file.map(), file.bytes()));
  file.Release();  // the array owns the mapping now
  return array;
}

absl::StatusOr<std::unique_ptr<NpyArray>> NpyArray::OpenInArchive(
    const std::string& path, const std::string& member) {
  MappedFile file;
  RETURN_IF_ERROR(file.Map(path));
  ASSIGN_OR_RETURN(const std::vector<ZipMember> members,
                   ReadZipIndex(file.view(), path));
  const std::string name =
      absl::EndsWith(member, ".npy") ? member : member + ".npy";
  std::vector<std::string> names;
  for (const ZipMember& m : members) {
    names.push_back(m.name);
    if (m.name != name) continue;
    const std::string where = absl::StrCat(path, ":", name);
    if (m.encrypted) {
      return absl::InvalidArgumentError(absl::StrCat(
          QuoteName(where), " is encrypted; cohort reads plain archives"));
    }
    if (!m.stored) {
      return absl::InvalidArgumentError(
          absl::StrCat(QuoteName(where),
                       " is compressed (np.savez_compressed), which cannot be "
                       "memory-mapped: save with np.savez, or as .npy files"));
    }
    ASSIGN_OR_RETURN(
        NpyHeader header,
        WholeArrayHeader(file.view().substr(m.offset, m.size), where));
    header.data_offset += m.offset;
    std::unique_ptr<NpyArray> array(
        new NpyArray(where, std::move(header), file.map(), file.bytes()));
    file.Release();
    return array;
  }
  // The first few members are enough to see what was meant.
  const size_t shown = std::min<size_t>(names.size(), 10);
  return absl::NotFoundError(absl::StrCat(
      QuoteName(path), " has no array \"", EscapeText(name), "\" (it holds: ",
      names.empty() ? "nothing"
                    : absl::StrJoin(names.begin(), names.begin() + shown, ", ",
                                    [](std::string* out, const std::string& n) {
                                      out->append(QuoteName(n));
                                    }),
      names.size() > shown ? ", ..." : "", ")"));
}

NpyArray::NpyArray(std::string path, NpyHeader header, void* map,
                   size_t map_bytes)
    : path_(std::move(path)),
      header_(std::move(header)),
      map_(map),
      map_bytes_(map_bytes),
      data_(static_cast<const uint8_t*>(map) + header_.data_offset) {}

NpyArray::~NpyArray() {
  if (map_ != nullptr) munmap(map_, map_bytes_);
}

std::string NpyFloat32Bytes(const std::vector<int64_t>& shape,
                            const float* data) {
  std::string dict = absl::StrCat(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (",
      absl::StrJoin(shape, ", "), shape.size() == 1 ? ",), }" : "), }");
  // NumPy pads the header so the data starts 64-byte aligned.
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  out.append(reinterpret_cast<const char*>(data), n * sizeof(float));
  return out;
}

void NpyToFloats(NpyType type, const uint8_t* p, int64_t n, float* out) {
  switch (type) {
    case NpyType::kFloat32:
      std::memcpy(out, p, n * sizeof(float));
      return;
    case NpyType::kFloat16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = HalfToFloat(h);
      }
      return;
    case NpyType::kUint8:
      for (int64_t i = 0; i < n; ++i) out[i] = p[i] * (1.0f / 255.0f);
      return;
    default:
      return;  // not inputs: the callers check the type first
  }
}

}  // namespace cohort

// Fuzzes the checkpoint reader (common/checkpoint.h) with arbitrary files.
//
// Input: one flag byte, then the file. Random bytes almost never pass the
// header CRC, so the flags let the fuzzer reach the parser behind it: bit 0
// recomputes the header CRC (where the declared header fits), bit 1 rewrites
// the footer (length, file CRC, magic). The file is read both directly and
// through LoadLatestCheckpoint.
//
// Properties: a rejected file is DATA_LOSS naming the path; an accepted one
// has unique tensor names and shapes that match their values, and the
// directory scan returns the same checkpoint.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint.h"
#include "common/crc32c.h"
#include "fuzz/fuzz_util.h"

namespace cohort {
namespace {

constexpr size_t kPreamble = 16;  // magic, version, header length
constexpr size_t kFooter = 20;    // length, CRC, magic
constexpr size_t kMinFile = kPreamble + 4 + kFooter;

// One directory per process, removed at exit.
fuzz::ScratchDir& Dir() {
  static fuzz::ScratchDir dir;
  return dir;
}

void PutLe(std::string* s, size_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    (*s)[at + i] = static_cast<char>(v >> (8 * i));
}

uint64_t GetLe(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | uint8_t(s[at + i]);
  return v;
}

// Makes the CRCs and footer agree with the rest of the file, as the flags
// ask (see the file comment).
void FixUp(uint8_t flags, std::string* file) {
  if ((flags & 1) && file->size() >= kPreamble) {
    const uint64_t header = GetLe(*file, 12, 4);
    if (kPreamble + header + 4 <= file->size()) {
      PutLe(file, kPreamble + header, Crc32c(file->data(), kPreamble + header),
            4);
    }
  }
  if ((flags & 2) && file->size() >= kMinFile) {
    const size_t at = file->size() - kFooter;
    PutLe(file, at, file->size(), 8);
    PutLe(file, at + 8, Crc32c(file->data(), at), 4);
    file->replace(at + 12, 8, "COHORTEN");
  }
}

void CheckAccepted(const Checkpoint& c) {
  std::set<std::string> names;
  for (const CheckpointTensor& t : c.tensors) {
    FUZZ_CHECK(names.insert(t.name).second, "tensor '" + t.name + "' twice");
    uint64_t elements = 1;
    bool overflow = false, zero = false;
    for (int64_t d : t.shape) {
      FUZZ_CHECK(d >= 0, "negative dimension in tensor '" + t.name + "'");
      zero |= d == 0;
      overflow |=
          __builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements);
    }
    if (zero) elements = 0, overflow = false;
    FUZZ_CHECK(!overflow && elements == t.values.size(),
               absl::StrCat("tensor '", t.name, "' has ", t.values.size(),
                            " values for ", elements, " elements"));
  }
}

void Run(uint8_t flags, std::string file) {
  FixUp(flags, &file);
  Dir().Clear();
  const std::string path = Dir().Write(CheckpointFileName(7), file);
  absl::StatusOr<Checkpoint> direct = ReadCheckpointFile(path);
  absl::StatusOr<Checkpoint> latest = LoadLatestCheckpoint(Dir().path());
  if (!direct.ok()) {
    FUZZ_CHECK(direct.status().code() == absl::StatusCode::kDataLoss,
               fuzz::Describe("rejection is not DATA_LOSS", direct.status()));
    FUZZ_CHECK(
        absl::StartsWith(direct.status().message(), path),
        fuzz::Describe("rejection does not name the file", direct.status()));
    FUZZ_CHECK(latest.status().code() == absl::StatusCode::kDataLoss,
               fuzz::Describe("directory scan accepted a rejected file",
                              latest.status()));
    return;
  }
  CheckAccepted(*direct);
  // The scan also demands that the header's step match the file name.
  FUZZ_CHECK(latest.ok() == (direct->step == 7),
             fuzz::Describe("directory scan disagrees", latest.status()));
}

}  // namespace
}  // namespace cohort

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  cohort::Run(data[0],
              std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  return 0;
}

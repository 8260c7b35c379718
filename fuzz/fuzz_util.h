// Helpers shared by the libFuzzer targets in fuzz/: a property check that
// aborts with a message, a private scratch directory for readers that take
// file names, and the separator that splits one fuzz input into several
// files.
//
// Ownership: ScratchDir owns its directory and removes it when destroyed.
// Thread safety: none needed; libFuzzer runs one input at a time.
#ifndef COHORT_FUZZ_FUZZ_UTIL_H_
#define COHORT_FUZZ_FUZZ_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

// A broken property is a finding: abort so that libFuzzer saves the input.
// (assert() would vanish under NDEBUG.)
#define FUZZ_CHECK(cond, what)                                             \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: %s\n", __FILE__, \
                   __LINE__, #cond, std::string(what).c_str());            \
      std::abort();                                                        \
    }                                                                      \
  } while (0)

namespace cohort {
namespace fuzz {

// Separates the files packed into one input (data-set fuzzers). Long enough
// not to occur in the seeds by chance; libFuzzer learns it from them.
inline constexpr absl::string_view kSplit = "\n--split--\n";

// `data` cut at every kSplit (the separators dropped).
std::vector<absl::string_view> SplitInput(absl::string_view data);

// The input as a string_view.
inline absl::string_view AsView(const uint8_t* data, size_t size) {
  return absl::string_view(reinterpret_cast<const char*>(data), size);
}

// Drops protobuf's log lines (e.g. "invalid UTF-8" on every such parse),
// which would drown libFuzzer's output. FATAL messages still abort.
void SilenceProtobufLogs();

// Whether to check the properties that the bugs these fuzzers found broke
// (each check names its bug where it is made). The bugs are fixed, so the
// checks are on; COHORT_FUZZ_KNOWN_BUGS=0 turns them off, should one come
// back while its fix is being written.
bool CheckKnownBugs();

// "what: message" of a status, for FUZZ_CHECK messages.
std::string Describe(absl::string_view what, const absl::Status& s);

// A directory of its own under $TEST_TMPDIR, $TMPDIR or /tmp, for readers
// that only take paths. Aborts if it cannot be created or written: that is
// a broken machine, not a finding about the input.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }

  // Writes `bytes` to path()/`name` (parent directories created) and
  // returns the full path.
  std::string Write(const std::string& name, absl::string_view bytes) const;

  // Removes everything inside path(), keeping the directory itself, so that
  // one input's files never leak into the next.
  void Clear() const;

 private:
  std::string path_;
};

}  // namespace fuzz
}  // namespace cohort

#endif  // COHORT_FUZZ_FUZZ_UTIL_H_

#include "worker/data/test_util.h"

#include <sys/stat.h>
#include <zlib.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace cohort {

int32_t LabelOf(const Dataset& dataset, int64_t index, float* x) {
  SampleOut out;
  out.features = x;
  const absl::Status s = dataset.Read(index, 0, out);
  CHECK(s.ok()) << s;
  return out.label;
}
namespace {

// A file every data test lists in `data`, so that its runfiles symlink
// leads back to the source tree.
constexpr char kAnchor[] = "worker/data/test_util.h";

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? std::string(buf) : "";
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : "";
}

// Walks up from `start` looking for <ancestor>/shared/data.
std::string WalkUp(std::string dir) {
  while (!dir.empty()) {
    const std::string candidate = dir + "/shared/data";
    if (IsDir(candidate)) return candidate;
    const size_t slash = dir.find_last_of('/');
    if (slash == std::string::npos || dir == "/") break;
    dir = slash == 0 ? "/" : dir.substr(0, slash);
  }
  return "";
}

std::vector<std::string> StartingPoints() {
  std::vector<std::string> starts;
  const std::string workspace =
      Env("TEST_WORKSPACE").empty() ? "cohort" : Env("TEST_WORKSPACE");
  if (!Env("TEST_SRCDIR").empty()) {
    starts.push_back(RealPath(
        absl::StrCat(Env("TEST_SRCDIR"), "/", workspace, "/", kAnchor)));
  }
  // Run by hand from bazel-bin/: the runfiles tree sits beside the binary.
  const std::string exe = RealPath("/proc/self/exe");
  if (!exe.empty()) {
    const std::string runfiles =
        Env("RUNFILES_DIR").empty() ? exe + ".runfiles" : Env("RUNFILES_DIR");
    starts.push_back(
        RealPath(absl::StrCat(runfiles, "/", workspace, "/", kAnchor)));
    starts.push_back(exe);
  }
  starts.push_back(RealPath("."));
  return starts;
}

}  // namespace

std::string FindTestDataDir() {
  const std::string env = Env("COHORT_DATA_DIR");
  if (!env.empty()) return IsDir(env) ? env : "";
  for (const std::string& start : StartingPoints()) {
    if (start.empty()) continue;
    std::string found = WalkUp(start);
    if (!found.empty()) return found;
  }
  return "";
}

std::string MissingDataMessage(const std::string& what) {
  return absl::StrCat(
      what,
      " not found, skipping: put the shared data at ../shared/data beside the "
      "workspace or set COHORT_DATA_DIR to the directory holding mnist/ and "
      "cifar10-subset/.");
}

std::string MakeTempDir() {
  const std::string base =
      Env("TEST_TMPDIR").empty() ? "/tmp" : Env("TEST_TMPDIR");
  std::string pattern = base + "/cohort_data_XXXXXX";
  CHECK(mkdtemp(pattern.data()) != nullptr) << "mkdtemp in " << base;
  return pattern;
}

void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  CHECK(f != nullptr) << "cannot write " << path;
  CHECK_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  CHECK_EQ(std::fclose(f), 0);
}

std::vector<uint8_t> GzipBytes(const std::vector<uint8_t>& raw) {
  z_stream s;
  std::memset(&s, 0, sizeof(s));
  // 16 + MAX_WBITS: write a gzip wrapper rather than zlib's.
  CHECK_EQ(deflateInit2(&s, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS,
                        8, Z_DEFAULT_STRATEGY),
           Z_OK);
  std::vector<uint8_t> out(deflateBound(&s, raw.size()) + 64);
  s.next_in = const_cast<Bytef*>(raw.data());
  s.avail_in = static_cast<uInt>(raw.size());
  s.next_out = out.data();
  s.avail_out = static_cast<uInt>(out.size());
  CHECK_EQ(deflate(&s, Z_FINISH), Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

}  // namespace cohort

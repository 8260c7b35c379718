#include "worker/data/file_reader.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/data/test_util.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<uint8_t>((i * 7) ^ (i >> 9));
  return v;
}

TEST(FileReader, ReadsRawAndGzippedFiles) {
  const std::string dir = MakeTempDir();
  const std::vector<uint8_t> raw = Pattern(300000);
  WriteFile(dir + "/a.bin", raw);
  WriteFile(dir + "/a.bin.gz", GzipBytes(raw));
  absl::StatusOr<std::vector<uint8_t>> plain = ReadMaybeGzipped(dir + "/a.bin");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(*plain, raw);
  absl::StatusOr<std::vector<uint8_t>> unzipped =
      ReadMaybeGzipped(dir + "/a.bin.gz");
  ASSERT_TRUE(unzipped.ok()) << unzipped.status();
  EXPECT_EQ(*unzipped, raw);
}

TEST(FileReader, ConcatenatedGzipMembersAreOneStream) {
  const std::vector<uint8_t> a = Pattern(1000), b = Pattern(5000);
  std::vector<uint8_t> gz = GzipBytes(a);
  const std::vector<uint8_t> gz_b = GzipBytes(b);
  gz.insert(gz.end(), gz_b.begin(), gz_b.end());
  absl::StatusOr<std::vector<uint8_t>> out = Gunzip(gz, "x.gz");
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<uint8_t> expected = a;
  expected.insert(expected.end(), b.begin(), b.end());
  EXPECT_EQ(*out, expected);
}

TEST(FileReader, MissingFileNamesThePath) {
  absl::StatusOr<std::vector<uint8_t>> r =
      ReadFileBytes(MakeTempDir() + "/nope.bin");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("nope.bin"));
}

TEST(FileReader, RejectsAFileWithoutGzipMagic) {
  absl::StatusOr<std::vector<uint8_t>> r = Gunzip(Pattern(100), "/d/f.gz");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("/d/f.gz is not a gzip file"));
}

TEST(FileReader, RejectsCorruptGzipData) {
  std::vector<uint8_t> gz = GzipBytes(Pattern(100000));
  for (size_t i = 20; i < 60; ++i) gz[i] ^= 0x5a;
  absl::StatusOr<std::vector<uint8_t>> r = Gunzip(gz, "/d/f.gz");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("/d/f.gz has corrupt gzip data"));
}

TEST(FileReader, RejectsABadChecksum) {
  std::vector<uint8_t> gz = GzipBytes(Pattern(1000));
  gz[gz.size() - 6] ^= 1;  // CRC-32 in the trailer
  absl::StatusOr<std::vector<uint8_t>> r = Gunzip(gz, "/d/f.gz");
  EXPECT_THAT(r.status().message(), HasSubstr("corrupt gzip data"));
}

TEST(FileReader, RejectsATruncatedGzipFile) {
  std::vector<uint8_t> gz = GzipBytes(Pattern(100000));
  gz.resize(gz.size() / 2);
  absl::StatusOr<std::vector<uint8_t>> r = Gunzip(gz, "/d/f.gz");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(),
              HasSubstr("/d/f.gz is a truncated gzip file"));
}

TEST(FileReader, RejectsTrailingGarbage) {
  std::vector<uint8_t> gz = GzipBytes(Pattern(100));
  gz.push_back(0x42);
  absl::StatusOr<std::vector<uint8_t>> r = Gunzip(gz, "/d/f.gz");
  EXPECT_THAT(r.status().message(), HasSubstr("trailing garbage"));
}

}  // namespace
}  // namespace cohort

namespace cohort {
namespace {

// CPU time of the calling thread: unlike the wall clock, it does not grow
// when other processes keep the machine busy.
double ThreadCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// A small .gz whose header implies N bytes but which inflates far beyond:
// decompression stops one byte past N, at once. "At once" is measured
// against inflating the same file whole, in CPU time, so that the verdict
// does not depend on the machine's load.
TEST(FileReader, StopsInflatingPastTheSizeTheHeaderImplies) {
  std::vector<uint8_t> bomb(size_t{64} << 20, 0);  // 64 MiB of zeros
  bomb[7] = 100;  // an IDX-like header: 8 bytes + 100 one-byte records
  const std::vector<uint8_t> gz = GzipBytes(bomb);
  ASSERT_LT(gz.size(), size_t{1} << 20);
  bomb = {};
  const ExpectedSize idx = [](const uint8_t* head, size_t n) -> size_t {
    return n < 8 ? 0 : 8 + head[7];
  };
  double start = ThreadCpuSeconds();
  absl::StatusOr<std::vector<uint8_t>> r = Gunzip(gz, "/d/bomb.gz", idx);
  const double bounded = ThreadCpuSeconds() - start;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(),
              HasSubstr("decompresses to more than the 108 bytes"));
  // Without the bound the same file decompresses whole.
  start = ThreadCpuSeconds();
  absl::StatusOr<std::vector<uint8_t>> whole = Gunzip(gz, "/d/bomb.gz");
  const double unbounded = ThreadCpuSeconds() - start;
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->size(), size_t{64} << 20);
  EXPECT_LT(bounded * 20, unbounded)
      << "bounded " << bounded << " s, whole " << unbounded << " s of CPU";
}

TEST(FileReader, AFileOfExactlyTheImpliedSizePasses) {
  std::vector<uint8_t> data(8 + 50, 1);
  data[7] = 50;
  const ExpectedSize idx = [](const uint8_t* head, size_t n) -> size_t {
    return n < 8 ? 0 : 8 + head[7];
  };
  absl::StatusOr<std::vector<uint8_t>> r =
      Gunzip(GzipBytes(data), "/d/ok.gz", idx);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, data);
}

// A data directory this process may not enter reads as "permission
// denied", not as its files being absent. Root enters anything, so as root
// the check runs in a child that has become "nobody" (uid 65534).
TEST(FileReader, AnUnreadableDirectoryIsPermissionDenied) {
  char base[] = "/tmp/cohort-locked-XXXXXX";
  ASSERT_NE(mkdtemp(base), nullptr);
  ASSERT_EQ(chmod(base, 0755), 0);
  const std::string dir = std::string(base) + "/data";
  ASSERT_EQ(mkdir(dir.c_str(), 0), 0);
  const auto check = [&dir] {
    const absl::Status s = CheckDirReadable(dir);
    return s.code() == absl::StatusCode::kPermissionDenied &&
           absl::StrContains(s.message(), dir) &&
           CheckDirReadable(dir + "-absent").ok();
  };
  bool refused = false;
  if (geteuid() != 0) {
    refused = check();
  } else {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      const bool dropped = setgid(65534) == 0 && setuid(65534) == 0;
      _exit(dropped && check() ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    refused = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  chmod(dir.c_str(), 0700);
  rmdir(dir.c_str());
  rmdir(base);
  EXPECT_TRUE(refused) << "a mode-000 data directory was not PermissionDenied";
}

}  // namespace
}  // namespace cohort

#include "common/checkpoint.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "gtest/gtest.h"

// Replaceable global allocation functions that record the largest request
// while tracking is on, so a test can prove that a corrupted length did not
// lead to a huge allocation.
namespace {
std::atomic<bool> g_track_allocations{false};
std::atomic<size_t> g_largest_allocation{0};
}  // namespace

void* operator new(size_t n) {
  if (g_track_allocations.load(std::memory_order_relaxed)) {
    size_t seen = g_largest_allocation.load();
    while (n > seen && !g_largest_allocation.compare_exchange_weak(seen, n)) {
    }
  }
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace cohort {
namespace {

namespace fs = std::filesystem;
using CrashAt = CheckpointWriteOptions::CrashAt;

// A fresh, empty directory under TEST_TMPDIR.
std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/ckpt_test_" + name;
  fs::remove_all(dir);
  return dir;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::set<std::string> Names(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    names.insert(e.path().filename().string());
  }
  return names;
}

std::set<std::string> CheckpointNames(std::initializer_list<int64_t> steps) {
  std::set<std::string> names;
  for (int64_t s : steps) names.insert(CheckpointFileName(s));
  return names;
}

std::string PathOf(const std::string& dir, int64_t step) {
  return dir + "/" + CheckpointFileName(step);
}

std::vector<float> RandomValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A checkpoint whose every field depends on `step`; `big_values` adds a
// tensor of that many floats.
Checkpoint MakeCheckpoint(int64_t step, size_t big_values = 0) {
  Checkpoint c;
  c.step = step;
  c.epoch = step / 10 + 1;
  c.epoch_offset = step % 10;
  c.generation = 0xF00DF00D00000000ull + step;
  c.spec_hash = 0x0123456789ABCDEFull ^ step;
  c.metadata["optimizer"] = "adam";
  c.metadata["binary"] = std::string("a\0b\xff", 4);
  c.metadata["empty"] = "";
  c.tensors.push_back({"layer1/w", {3, 4}, RandomValues(12, step)});
  c.tensors.push_back({"empty", {0}, {}});
  c.tensors.push_back({"zero_dim", {2, 0, 3}, {}});
  c.tensors.push_back({"scalar", {}, {static_cast<float>(step)}});
  c.tensors.push_back({"special",
                       {6},
                       {-0.0f, std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::denorm_min(),
                        std::numeric_limits<float>::max(), 1.5f}});
  if (big_values > 0) {
    c.tensors.push_back({"big",
                         {static_cast<int64_t>(big_values)},
                         RandomValues(big_values, step + 1)});
  }
  return c;
}

void ExpectSameCheckpoint(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.epoch_offset, b.epoch_offset);
  EXPECT_EQ(a.generation, b.generation);
  EXPECT_EQ(a.spec_hash, b.spec_hash);
  EXPECT_EQ(a.metadata, b.metadata);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const CheckpointTensor& x = a.tensors[i];
    const CheckpointTensor& y = b.tensors[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.shape, y.shape) << x.name;
    ASSERT_EQ(x.values.size(), y.values.size()) << x.name;
    // Bitwise, so NaN and -0.0 count.
    EXPECT_EQ(std::memcmp(x.values.data(), y.values.data(),
                          x.values.size() * sizeof(float)),
              0)
        << x.name;
  }
}

bool Contains(absl::string_view haystack, absl::string_view needle) {
  return haystack.find(needle) != absl::string_view::npos;
}

TEST(Checkpoint, FileNameIsZeroPaddedStep) {
  EXPECT_EQ(CheckpointFileName(42), "ckpt-000000000042.cohort");
  EXPECT_EQ(CheckpointFileName(0), "ckpt-000000000000.cohort");
}

TEST(Checkpoint, RoundTripKeepsEveryField) {
  const std::string dir = FreshDir("roundtrip");
  const Checkpoint c = MakeCheckpoint(7, /*big_values=*/5 * 1024 * 1024 / 4);
  ASSERT_TRUE(WriteCheckpoint(dir, c).ok());
  EXPECT_EQ(Names(dir), CheckpointNames({7}));

  absl::StatusOr<Checkpoint> read = ReadCheckpointFile(PathOf(dir, 7));
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameCheckpoint(*read, c);

  std::vector<std::string> rejected;
  absl::StatusOr<Checkpoint> latest = LoadLatestCheckpoint(dir, &rejected);
  ASSERT_TRUE(latest.ok()) << latest.status();
  ExpectSameCheckpoint(*latest, c);
  EXPECT_TRUE(rejected.empty());
}

TEST(Checkpoint, RewritingTheSameStepReplacesTheFile) {
  const std::string dir = FreshDir("rewrite");
  Checkpoint c = MakeCheckpoint(3);
  ASSERT_TRUE(WriteCheckpoint(dir, c).ok());
  c.metadata["optimizer"] = "sgd";
  ASSERT_TRUE(WriteCheckpoint(dir, c).ok());
  absl::StatusOr<Checkpoint> latest = LoadLatestCheckpoint(dir);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->metadata.at("optimizer"), "sgd");
  EXPECT_EQ(Names(dir), CheckpointNames({3}));
}

TEST(Checkpoint, EveryFlippedBitIsDetectedAndLoadFallsBack) {
  const std::string dir = FreshDir("bitflip");
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(1)).ok());
  const Checkpoint newest = MakeCheckpoint(2, /*big_values=*/256);
  ASSERT_TRUE(WriteCheckpoint(dir, newest).ok());
  const std::string path = PathOf(dir, 2);
  const std::string good = ReadBytes(path);
  ASSERT_GT(good.size(), 1000u);

  // Every byte of the preamble and footer, the rest spread over the file.
  std::set<size_t> positions;
  for (size_t i = 0; i < 16; ++i) positions.insert(i);
  for (size_t i = good.size() - 20; i < good.size(); ++i) positions.insert(i);
  std::mt19937 rng(3);
  while (positions.size() < 200) positions.insert(rng() % good.size());

  for (size_t pos : positions) {
    std::string bad = good;
    bad[pos] ^= static_cast<char>(1 << (pos % 8));
    WriteBytes(path, bad);
    absl::StatusOr<Checkpoint> read = ReadCheckpointFile(path);
    ASSERT_FALSE(read.ok()) << "flip at byte " << pos << " went unnoticed";
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss)
        << read.status();
    EXPECT_TRUE(Contains(read.status().message(), path)) << read.status();

    std::vector<std::string> rejected;
    absl::StatusOr<Checkpoint> latest = LoadLatestCheckpoint(dir, &rejected);
    ASSERT_TRUE(latest.ok()) << latest.status();
    EXPECT_EQ(latest->step, 1) << "flip at byte " << pos;
    ASSERT_EQ(rejected.size(), 1u);
    EXPECT_EQ(rejected[0], read.status().message());
  }

  // The damaged file is reported, never deleted; restored, it wins again.
  WriteBytes(path, good);
  absl::StatusOr<Checkpoint> latest = LoadLatestCheckpoint(dir);
  ASSERT_TRUE(latest.ok()) << latest.status();
  ExpectSameCheckpoint(*latest, newest);
}

TEST(Checkpoint, TruncatedOrExtendedFileIsDetected) {
  const std::string dir = FreshDir("truncate");
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(5, 1000)).ok());
  const std::string path = PathOf(dir, 5);
  const std::string good = ReadBytes(path);
  const size_t header_end =
      16 +
      (static_cast<uint8_t>(good[12]) | static_cast<uint8_t>(good[13]) << 8) +
      4;
  ASSERT_LT(header_end, good.size() - 4000);
  const size_t n = good.size();
  for (size_t len : {size_t{0}, size_t{1}, size_t{8}, size_t{15}, size_t{16},
                     size_t{30}, header_end / 2, header_end - 4, header_end - 1,
                     header_end, header_end + 1, header_end + 2000, n - 21,
                     n - 20, n - 19, n - 12, n - 8, n - 1}) {
    WriteBytes(path, good.substr(0, len));
    absl::StatusOr<Checkpoint> read = ReadCheckpointFile(path);
    ASSERT_FALSE(read.ok()) << "truncated to " << len << " of " << n;
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss)
        << read.status();
  }
  WriteBytes(path, good + std::string(1, '\0'));
  EXPECT_EQ(ReadCheckpointFile(path).status().code(),
            absl::StatusCode::kDataLoss);
  WriteBytes(path, good);
  EXPECT_TRUE(ReadCheckpointFile(path).ok());
}

// Offsets in a file holding only tensor "t" of shape {1} and no metadata
// (see the format in checkpoint.h).
constexpr size_t kHeaderLengthAt = 12;
constexpr size_t kMetadataCountAt = 16 + 5 * 8;
constexpr size_t kTensorCountAt = kMetadataCountAt + 4;
constexpr size_t kRankAt = kTensorCountAt + 4 + 4 + 1;
constexpr size_t kDimAt = kRankAt + 4;
constexpr size_t kByteLengthAt = kDimAt + 8;

uint64_t GetLe(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | uint8_t(s[at + i]);
  return v;
}

void PutLe(std::string* s, size_t at, int bytes, uint64_t v) {
  for (int i = 0; i < bytes; ++i) (*s)[at + i] = char(v >> (8 * i));
}

// Recomputes the header CRC so that a hand-edited header passes it and the
// reader's later checks are what must catch the edit.
void FixHeaderCrc(std::string* s) {
  const size_t crc_at = 16 + GetLe(*s, kHeaderLengthAt, 4);
  PutLe(s, crc_at, 4, Crc32c(s->data(), crc_at));
}

class HugeLengths : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshDir("huge");
    Checkpoint c;
    c.step = 1;
    c.tensors.push_back({"t", {1}, {1.0f}});
    ASSERT_TRUE(WriteCheckpoint(dir_, c).ok());
    path_ = PathOf(dir_, 1);
    good_ = ReadBytes(path_);
    // The offsets above must describe this file.
    ASSERT_EQ(GetLe(good_, kTensorCountAt, 4), 1u);
    ASSERT_EQ(GetLe(good_, kRankAt, 4), 1u);
    ASSERT_EQ(GetLe(good_, kDimAt, 8), 1u);
    ASSERT_EQ(GetLe(good_, kByteLengthAt, 8), 4u);
  }

  // Reads `bytes` as the checkpoint file and expects a quick DATA_LOSS with
  // no allocation anywhere near the declared size.
  void ExpectRejectedCheaply(const std::string& bytes) {
    WriteBytes(path_, bytes);
    g_largest_allocation = 0;
    g_track_allocations = true;
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<Checkpoint> read = ReadCheckpointFile(path_);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    g_track_allocations = false;
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss)
        << read.status();
    EXPECT_LT(g_largest_allocation.load(), size_t{1} << 20);
    EXPECT_LT(elapsed, std::chrono::seconds(1));
    std::vector<std::string> rejected;
    EXPECT_EQ(LoadLatestCheckpoint(dir_, &rejected).status().code(),
              absl::StatusCode::kDataLoss);
    EXPECT_EQ(rejected.size(), 1u);
  }

  std::string dir_, path_, good_;
};

TEST_F(HugeLengths, TerabyteTensorInASmallFile) {
  std::string bad = good_;
  PutLe(&bad, kDimAt, 8, uint64_t{1} << 38);         // 2^38 floats
  PutLe(&bad, kByteLengthAt, 8, uint64_t{1} << 40);  // = 1 TiB
  FixHeaderCrc(&bad);
  ExpectRejectedCheaply(bad);
}

TEST_F(HugeLengths, ShapeOverflowingInt64) {
  std::string bad = good_;
  PutLe(&bad, kDimAt, 8, uint64_t{1} << 62);
  FixHeaderCrc(&bad);
  ExpectRejectedCheaply(bad);
}

TEST_F(HugeLengths, HugeCounts) {
  for (size_t at : {kMetadataCountAt, kTensorCountAt, kRankAt}) {
    std::string bad = good_;
    PutLe(&bad, at, 4, 0xFFFFFFFFu);
    FixHeaderCrc(&bad);
    ExpectRejectedCheaply(bad);
  }
}

TEST_F(HugeLengths, HugeHeaderLength) {
  std::string bad = good_;
  PutLe(&bad, kHeaderLengthAt, 4, 0xFFFFFFF0u);
  ExpectRejectedCheaply(bad);
}

// Each CRC layer on its own: edits that keep the outer checks consistent
// must still be caught by the inner one.
TEST_F(HugeLengths, TensorCrcCatchesDataEditBehindAValidHeader) {
  std::string bad = good_;
  const size_t data_at = 16 + GetLe(bad, kHeaderLengthAt, 4) + 4;
  bad[data_at] ^= 0x01;
  WriteBytes(path_, bad);
  absl::StatusOr<Checkpoint> read = ReadCheckpointFile(path_);
  ASSERT_FALSE(read.ok());
  EXPECT_TRUE(Contains(read.status().message(), "tensor 't' CRC32C mismatch"))
      << read.status();
}

TEST_F(HugeLengths, FileCrcCatchesDataEditWithForgedTensorCrc) {
  std::string bad = good_;
  const size_t data_at = 16 + GetLe(bad, kHeaderLengthAt, 4) + 4;
  bad[data_at] ^= 0x01;
  PutLe(&bad, kByteLengthAt + 8, 4, Crc32c(bad.data() + data_at, 4));
  FixHeaderCrc(&bad);
  WriteBytes(path_, bad);
  absl::StatusOr<Checkpoint> read = ReadCheckpointFile(path_);
  ASSERT_FALSE(read.ok());
  EXPECT_TRUE(Contains(read.status().message(), "file CRC32C mismatch"))
      << read.status();
}

TEST_F(HugeLengths, HeaderCrcCatchesHeaderEditWithForgedFileCrc) {
  std::string bad = good_;
  bad[16] ^= 0x01;  // step
  const size_t footer_at = bad.size() - 20;
  PutLe(&bad, footer_at + 8, 4, Crc32c(bad.data(), footer_at));
  WriteBytes(path_, bad);
  absl::StatusOr<Checkpoint> read = ReadCheckpointFile(path_);
  ASSERT_FALSE(read.ok());
  EXPECT_TRUE(Contains(read.status().message(), "header CRC32C mismatch"))
      << read.status();
}

TEST_F(HugeLengths, FooterFieldsAreChecked) {
  const size_t footer_at = good_.size() - 20;
  std::string bad = good_;
  PutLe(&bad, footer_at, 8, good_.size() + 1);
  WriteBytes(path_, bad);
  absl::StatusOr<Checkpoint> read = ReadCheckpointFile(path_);
  ASSERT_FALSE(read.ok());
  EXPECT_TRUE(Contains(read.status().message(), "footer says the file is"))
      << read.status();

  bad = good_;
  bad[bad.size() - 1] = 'X';
  WriteBytes(path_, bad);
  read = ReadCheckpointFile(path_);
  ASSERT_FALSE(read.ok());
  EXPECT_TRUE(Contains(read.status().message(), "footer magic"))
      << read.status();
}

struct CrashCase {
  CrashAt at;
  bool renamed;  // whether the new file is committed at that point
  const char* name;
};

void PrintTo(const CrashCase& c, std::ostream* os) { *os << c.name; }

class CrashTest : public ::testing::TestWithParam<CrashCase> {};

// Writes checkpoint 4 in a child that dies at the crash point, over
// checkpoints 1..3 (keep 3, so retention has one file to delete).
TEST_P(CrashTest, LoadSeesOldOrNewNeverBroken) {
  const CrashCase& cc = GetParam();
  const std::string dir = FreshDir(std::string("crash_") + cc.name);
  CheckpointWriteOptions o;
  o.keep = 3;
  for (int64_t step : {1, 2, 3}) {
    ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(step, 1000), o).ok());
  }
  const Checkpoint next = MakeCheckpoint(4, 100000);

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    CheckpointWriteOptions crash = o;
    crash.crash_at = cc.at;
    const absl::Status s = WriteCheckpoint(dir, next, crash);
    std::_Exit(s.ok() ? 1 : 2);  // reaching here means no crash happened
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 42) << "the child did not crash";

  const std::string temp =
      CheckpointFileName(4) + ".tmp-" + std::to_string(child);
  const std::set<std::string> after_crash = Names(dir);
  EXPECT_EQ(after_crash.count(temp), cc.renamed ? 0u : 1u);
  if (cc.at == CrashAt::kDuringRetention) {
    EXPECT_EQ(after_crash, CheckpointNames({2, 3, 4}));
  } else {
    // Nothing old is deleted before the new file is committed and synced.
    for (int64_t step : {1, 2, 3}) {
      EXPECT_EQ(after_crash.count(CheckpointFileName(step)), 1u) << step;
    }
  }

  std::vector<std::string> rejected;
  absl::StatusOr<Checkpoint> latest = LoadLatestCheckpoint(dir, &rejected);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_TRUE(rejected.empty()) << rejected[0];
  if (cc.renamed) {
    ExpectSameCheckpoint(*latest, next);
  } else {
    ExpectSameCheckpoint(*latest, MakeCheckpoint(3, 1000));
  }

  // A later write succeeds, applies retention and removes the dead temp.
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(5), o).ok());
  EXPECT_EQ(Names(dir), cc.renamed ? CheckpointNames({3, 4, 5})
                                   : CheckpointNames({2, 3, 5}));
  latest = LoadLatestCheckpoint(dir);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->step, 5);
}

INSTANTIATE_TEST_SUITE_P(
    EveryCrashPoint, CrashTest,
    ::testing::Values(
        CrashCase{CrashAt::kAfterTempWrite, false, "AfterTempWrite"},
        CrashCase{CrashAt::kAfterFsync, false, "AfterFsync"},
        CrashCase{CrashAt::kAfterRename, true, "AfterRename"},
        CrashCase{CrashAt::kAfterDirFsync, true, "AfterDirFsync"},
        CrashCase{CrashAt::kDuringRetention, true, "DuringRetention"}),
    [](const ::testing::TestParamInfo<CrashCase>& info) {
      return std::string(info.param.name);
    });

TEST(Checkpoint, TempFileOfALiveWriterIsKept) {
  const std::string dir = FreshDir("livetemp");
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(1)).ok());
  // getppid() is alive (it runs this test); pid 1 too.
  const std::string live =
      CheckpointFileName(9) + ".tmp-" + std::to_string(getppid());
  const std::string other = "notes.tmp-123";  // not ours: never touched
  WriteBytes(dir + "/" + live, "partial");
  WriteBytes(dir + "/" + other, "x");
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(2)).ok());
  const std::set<std::string> names = Names(dir);
  EXPECT_EQ(names.count(live), 1u);
  EXPECT_EQ(names.count(other), 1u);
}

TEST(Checkpoint, RetentionKeepsExactlyTheNewest) {
  const std::string dir = FreshDir("retention");
  CheckpointWriteOptions o;
  o.keep = 2;
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(1), o).ok());
  EXPECT_EQ(Names(dir), CheckpointNames({1}));
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(2), o).ok());
  EXPECT_EQ(Names(dir), CheckpointNames({1, 2}));
  for (int64_t step = 3; step <= 6; ++step) {
    ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(step), o).ok());
    EXPECT_EQ(Names(dir), CheckpointNames({step - 1, step}));
  }
  // An older step written again (a rollback) deletes nothing at or after it.
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(4), o).ok());
  EXPECT_EQ(Names(dir), CheckpointNames({4, 5, 6}));
  // Default keep is 3; other files in the directory are left alone.
  WriteBytes(dir + "/README", "mine");
  WriteBytes(dir + "/ckpt-abc.cohort", "not a step");
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(7)).ok());
  std::set<std::string> want = CheckpointNames({5, 6, 7});
  want.insert("README");
  want.insert("ckpt-abc.cohort");
  EXPECT_EQ(Names(dir), want);

  o.keep = 0;
  EXPECT_EQ(WriteCheckpoint(dir, MakeCheckpoint(8), o).code(),
            absl::StatusCode::kInvalidArgument);
}

// checkpoint.keep_best's directory: one checkpoint, even when a crashed
// run left a newer one there.
TEST(Checkpoint, OnlyThisKeepsJustTheNewFile) {
  const std::string dir = FreshDir("only_this");
  CheckpointWriteOptions o;
  o.keep = 1;
  o.only_this = true;
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(9), o).ok());
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(4), o).ok());
  EXPECT_EQ(Names(dir), CheckpointNames({4}));
  WriteBytes(dir + "/best.json", "{}");
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(6), o).ok());
  std::set<std::string> want = CheckpointNames({6});
  want.insert("best.json");
  EXPECT_EQ(Names(dir), want);
}

TEST(Checkpoint, CreatesNestedDirectory) {
  const std::string dir = FreshDir("nested") + "/a/b/c";
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(1)).ok());
  EXPECT_EQ(Names(dir), CheckpointNames({1}));
}

TEST(Checkpoint, DirectoryUnderAFileFailsNamingThePath) {
  const std::string base = FreshDir("underfile");
  fs::create_directories(base);
  WriteBytes(base + "/file", "x");
  const std::string dir = base + "/file/ckpts";
  const absl::Status s = WriteCheckpoint(dir, MakeCheckpoint(1));
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), dir)) << s;
  EXPECT_TRUE(Contains(s.message(), "Not a directory")) << s;
  EXPECT_EQ(Names(base), std::set<std::string>({"file"}));
}

TEST(Checkpoint, UnwritableDirectoryFailsAndLeavesNothing) {
  if (geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  const std::string dir = FreshDir("readonly");
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(1)).ok());
  ASSERT_EQ(chmod(dir.c_str(), 0555), 0);
  const absl::Status s = WriteCheckpoint(dir, MakeCheckpoint(2));
  chmod(dir.c_str(), 0755);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), dir)) << s;
  EXPECT_TRUE(Contains(s.message(), "Permission denied")) << s;
  EXPECT_EQ(Names(dir), CheckpointNames({1}));
}

TEST(Checkpoint, TempPathTakenFailsAndLeavesNoFinalFile) {
  const std::string dir = FreshDir("temptaken");
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(1)).ok());
  const std::string temp = PathOf(dir, 2) + ".tmp-" + std::to_string(getpid());
  fs::create_directory(temp);  // open(O_WRONLY) fails with EISDIR
  const absl::Status s = WriteCheckpoint(dir, MakeCheckpoint(2));
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), temp)) << s;
  EXPECT_FALSE(fs::exists(PathOf(dir, 2)));
  EXPECT_EQ(LoadLatestCheckpoint(dir)->step, 1);
  fs::remove(temp);
}

// A write that fails part-way (EFBIG from RLIMIT_FSIZE stands in for ENOSPC,
// which a test cannot cause portably) removes its temp file.
TEST(Checkpoint, FailedWriteRemovesItsTempFile) {
  const std::string dir = FreshDir("efbig");
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(1)).ok());
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {64 << 10, 64 << 10};
    setrlimit(RLIMIT_FSIZE, &limit);
    const absl::Status s = WriteCheckpoint(dir, MakeCheckpoint(2, 1 << 20));
    const std::string message(s.message());
    (void)!write(fds[1], message.data(), message.size());
    std::_Exit(s.ok() ? 1 : 0);
  }
  close(fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) {
    message.append(buf, n);
  }
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the write did not fail";
  EXPECT_TRUE(Contains(message, PathOf(dir, 2) + ".tmp-")) << message;
  EXPECT_TRUE(Contains(message, "File too large")) << message;
  EXPECT_EQ(Names(dir), CheckpointNames({1}));
}

TEST(Checkpoint, InconsistentCheckpointIsRejectedBeforeWriting) {
  const std::string dir = FreshDir("invalid");
  Checkpoint c = MakeCheckpoint(1);
  c.tensors[0].shape = {5, 5};
  EXPECT_EQ(WriteCheckpoint(dir, c).code(), absl::StatusCode::kInvalidArgument);
  c = MakeCheckpoint(1);
  c.tensors[1].name = c.tensors[0].name;
  EXPECT_EQ(WriteCheckpoint(dir, c).code(), absl::StatusCode::kInvalidArgument);
  c = MakeCheckpoint(1);
  c.tensors[0].shape = {-3, -4};
  EXPECT_EQ(WriteCheckpoint(dir, c).code(), absl::StatusCode::kInvalidArgument);
  c = MakeCheckpoint(-1);
  EXPECT_EQ(WriteCheckpoint(dir, c).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir));
}

TEST(Checkpoint, LoadFromMissingOrEmptyDirectoryIsNotFound) {
  const std::string dir = FreshDir("empty");
  absl::StatusOr<Checkpoint> r = LoadLatestCheckpoint(dir);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(r.status().message(), dir)) << r.status();
  fs::create_directories(dir);
  WriteBytes(dir + "/ckpt-000000000001.cohort.tmp-99", "partial");
  r = LoadLatestCheckpoint(dir);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(r.status().message(), dir)) << r.status();
  EXPECT_EQ(ReadCheckpointFile(dir + "/nope").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(Checkpoint, LoadWithEveryFileBadIsDataLossListingEach) {
  const std::string dir = FreshDir("allbad");
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(1)).ok());
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(2)).ok());
  WriteBytes(PathOf(dir, 1), "garbage");
  std::string two = ReadBytes(PathOf(dir, 2));
  two[two.size() / 2] ^= 0x10;
  WriteBytes(PathOf(dir, 2), two);
  std::vector<std::string> rejected;
  absl::StatusOr<Checkpoint> r = LoadLatestCheckpoint(dir, &rejected);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(r.status().message(), PathOf(dir, 1))) << r.status();
  EXPECT_TRUE(Contains(r.status().message(), PathOf(dir, 2))) << r.status();
  ASSERT_EQ(rejected.size(), 2u);
  EXPECT_TRUE(Contains(rejected[0], PathOf(dir, 2) + ": ")) << rejected[0];
  EXPECT_TRUE(Contains(rejected[1], PathOf(dir, 1) + ": ")) << rejected[1];
  EXPECT_EQ(Names(dir), CheckpointNames({1, 2}));  // reported, not deleted
}

TEST(Checkpoint, FileWhoseNameDisagreesWithItsStepIsRejected) {
  const std::string dir = FreshDir("misnamed");
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(1)).ok());
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(2)).ok());
  fs::copy_file(PathOf(dir, 1), PathOf(dir, 9));
  std::vector<std::string> rejected;
  absl::StatusOr<Checkpoint> r = LoadLatestCheckpoint(dir, &rejected);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->step, 2);
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_TRUE(Contains(rejected[0], "header says step 1")) << rejected[0];
}

TEST(Checkpoint, StepOfFileNameReadsOnlyCommittedNames) {
  EXPECT_EQ(CheckpointStepOfFileName(CheckpointFileName(42)), 42);
  EXPECT_EQ(CheckpointStepOfFileName("ckpt-000000000042.cohort.tmp-7"), -1);
  EXPECT_EQ(CheckpointStepOfFileName("ckpt-best.cohort"), -1);
  EXPECT_EQ(CheckpointStepOfFileName("model.onnx"), -1);
}

// A FIFO under a checkpoint's name would block an open until a writer came:
// it is a damaged checkpoint, reported at once, and the load falls back.
TEST(Checkpoint, FifoUnderACheckpointNameIsRejectedWithoutBlocking) {
  alarm(30);  // a blocking open fails the test instead of hanging it
  const std::string dir = FreshDir("fifo");
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(1)).ok());
  ASSERT_EQ(mkfifo(PathOf(dir, 99).c_str(), 0600), 0);
  absl::StatusOr<Checkpoint> r = ReadCheckpointFile(PathOf(dir, 99));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(r.status().message(),
            PathOf(dir, 99) + ": a FIFO, not a regular file");
  std::vector<std::string> rejected;
  r = LoadLatestCheckpoint(dir, &rejected);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->step, 1);
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0], PathOf(dir, 99) + ": a FIFO, not a regular file");
  alarm(0);
}

// The directory's checkpoint names are the writer's own: committing a step
// replaces what its name held, so a run that skipped a bad entry goes on.
TEST(Checkpoint, CommitReplacesAFifoUnderItsName) {
  const std::string dir = FreshDir("fifo_commit");
  fs::create_directories(dir);
  ASSERT_EQ(mkfifo(PathOf(dir, 5).c_str(), 0600), 0);
  ASSERT_TRUE(WriteCheckpoint(dir, MakeCheckpoint(5)).ok());
  EXPECT_EQ(LoadLatestCheckpoint(dir)->step, 5);
}

}  // namespace
}  // namespace cohort

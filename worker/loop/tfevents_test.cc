#include "worker/loop/tfevents.h"

#include <cstdlib>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "gtest/gtest.h"
#include "worker/loop/tfrecord.h"

namespace cohort {
namespace {

std::string Hex(const std::string& s) { return absl::BytesToHexString(s); }

std::string TempDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  EXPECT_TRUE(CheckCanWriteDir(path).ok());
  return path;
}

// Expected bytes as TensorBoard's event.proto and summary.proto lay them
// out: key = field << 3 | wire type.
TEST(TfEvents, FileVersionEvent) {
  // 09: wall_time (1, fixed64) = 1.5; 1a: file_version (3, bytes).
  EXPECT_EQ(Hex(FileVersionEvent(1.5)),
            "09000000000000f83f"
            "1a0d" +
                Hex("brain.Event:2"));
}

TEST(TfEvents, ScalarsEvent) {
  // 10: step (2, varint) = 7; 2a: summary (5, bytes) holding 0a: value (1,
  // bytes) holding 0a: tag (1, bytes) and 15: simple_value (2, fixed32).
  EXPECT_EQ(Hex(ScalarsEvent(2.0, 7, {{"a", 1.0}, {"b", 0.0}})),
            "090000000000000040"
            "1007"
            "2a14"
            "0a08"
            "0a0161"
            "150000803f"
            "0a08"
            "0a0162"
            "1500000000");
}

TEST(TfEvents, LongTagAndLargeStepUseMultiByteVarints) {
  const std::string tag(200, 't');
  const std::string e = ScalarsEvent(0, 300, {{tag, 2.0}});
  // step 300 = ac 02; the value's length 3 + 200 + 5 = 208 = d0 01.
  EXPECT_EQ(Hex(e.substr(9, 3)), "10ac02");
  EXPECT_NE(Hex(e).find("0ad0010ac801"), std::string::npos);
}

TEST(TfEvents, SessionStartEvent) {
  // 3a: session_log (7, bytes) holding 08: status (1, varint) = START (1).
  EXPECT_EQ(Hex(SessionStartEvent(0.0, 5)),
            "090000000000000000"
            "1005"
            "3a020801");
}

TEST(TfEvents, FileNameIsTensorBoards) {
  EXPECT_EQ(EventFileName(absl::FromUnixSeconds(1700000000), "node-1.lab"),
            "events.out.tfevents.1700000000.node-1.lab");
  EXPECT_EQ(EventFileName(absl::FromUnixSeconds(5), "a b/c"),
            "events.out.tfevents.0000000005.a_b_c");
}

TEST(TfEvents, WriterStartsWithFileVersionAndNeverReusesAName) {
  const std::string dir = TempDir("tfevents_writer");
  const absl::Time now = absl::FromUnixSeconds(1700000123);
  auto a = EventFileWriter::Create(dir, now);
  auto b = EventFileWriter::Create(dir, now);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->path(), (*a)->path() + ".1");
  (*a)->Add(SessionStartEvent(1.0, 1));
  ASSERT_TRUE((*a)->Flush().ok());
  std::string want;
  AppendTfRecord(FileVersionEvent(1700000123.0), &want);
  AppendTfRecord(SessionStartEvent(1.0, 1), &want);
  EXPECT_EQ(Hex(*ReadFile((*a)->path())), Hex(want));
}

}  // namespace
}  // namespace cohort

#include "worker/loop/tfrecord.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "common/crc32c.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

uint64_t LittleEndian(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= static_cast<uint64_t>(static_cast<uint8_t>(s[at + i])) << (8 * i);
  }
  return v;
}

// The records of `file`, each CRC checked as a reader must (fails the test
// on a bad one).
std::vector<std::string> ReadRecords(const std::string& file) {
  std::vector<std::string> records;
  size_t at = 0;
  while (at < file.size()) {
    EXPECT_GE(file.size() - at, 16u) << "torn record at " << at;
    if (file.size() - at < 16) break;
    const uint64_t length = LittleEndian(file, at, 8);
    EXPECT_EQ(
        UnmaskCrc32c(static_cast<uint32_t>(LittleEndian(file, at + 8, 4))),
        Crc32c(file.data() + at, 8));
    const std::string data = file.substr(at + 12, length);
    EXPECT_EQ(UnmaskCrc32c(static_cast<uint32_t>(
                  LittleEndian(file, at + 12 + length, 4))),
              Crc32c(data.data(), data.size()));
    records.push_back(data);
    at += 16 + length;
  }
  return records;
}

std::string Framed(const std::string& data) {
  std::string out;
  AppendTfRecord(data, &out);
  return absl::BytesToHexString(out);
}

TEST(TfRecord, KnownFramings) {
  // TFRecord's empty record: the masked CRCs of eight zero bytes and of
  // nothing.
  EXPECT_EQ(Framed(""), "000000000000000029039807d8ea82a2");
  EXPECT_EQ(Framed("hello"), "0500000000000000eab2043e68656c6c6fbb1f1c19");
}

TEST(TfRecord, RecordsReadBackWithValidCrcs) {
  std::mt19937 rng(3);
  std::vector<std::string> written;
  std::string file;
  for (size_t n : {0, 1, 127, 128, 300, 70000}) {
    std::string data(n, '\0');
    for (char& c : data) c = static_cast<char>(rng());
    written.push_back(data);
    AppendTfRecord(data, &file);
  }
  EXPECT_EQ(ReadRecords(file), written);
}

TEST(TfRecord, OneFlippedBitFailsACrc) {
  std::string file;
  AppendTfRecord("some event bytes", &file);
  file[14] ^= 0x10;  // in the data
  const uint32_t stored = UnmaskCrc32c(
      static_cast<uint32_t>(LittleEndian(file, file.size() - 4, 4)));
  EXPECT_NE(stored, Crc32c(file.data() + 12, file.size() - 16));
}

}  // namespace
}  // namespace cohort

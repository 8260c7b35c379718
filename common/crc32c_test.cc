#include "common/crc32c.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

using crc32c_internal::Crc32cHardware;
using crc32c_internal::Crc32cSoftware;
using crc32c_internal::HaveHardwareCrc32c;

TEST(Crc32c, StandardCheckValue) {
  // The "check" value of CRC-32C from the CRC catalogue.
  const std::string s = "123456789";
  EXPECT_EQ(Crc32c(s.data(), s.size()), 0xE3069283u);
  EXPECT_EQ(Crc32cSoftware(s.data(), s.size(), 0), 0xE3069283u);
  if (HaveHardwareCrc32c()) {
    EXPECT_EQ(Crc32cHardware(s.data(), s.size(), 0), 0xE3069283u);
  }
}

TEST(Crc32c, KnownVectorsFromRfc3720) {
  // iSCSI test patterns (RFC 3720 B.4): 32 zero bytes and 32 0xFF bytes.
  const std::vector<uint8_t> zeros(32, 0x00), ones(32, 0xFF);
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  std::vector<uint8_t> ascending(32);
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32c(ascending.data(), ascending.size()), 0x46DD794Eu);
}

TEST(Crc32c, MaskedAsTfRecordStoresIt) {
  // TFRecord's empty record stores the masked CRCs of eight zero bytes
  // (its length) and of nothing: 0x07980329 and 0xa282ead8.
  const std::vector<uint8_t> length(8, 0x00);
  EXPECT_EQ(MaskCrc32c(Crc32c(length.data(), length.size())), 0x07980329u);
  EXPECT_EQ(MaskCrc32c(Crc32c(nullptr, 0)), 0xa282ead8u);
  const std::string s = "123456789";
  EXPECT_EQ(MaskCrc32c(Crc32c(s.data(), s.size())), 0xc78ab0e5u);
  EXPECT_EQ(MaskCrc32c(0x8A9136AAu), 0x0fd7fffau);
}

TEST(Crc32c, UnmaskUndoesMask) {
  std::mt19937 rng(11);
  for (uint32_t crc : {0u, 1u, 0xffffffffu, 0xE3069283u}) {
    EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(crc)), crc);
  }
  for (int i = 0; i < 1000; ++i) {
    const uint32_t crc = static_cast<uint32_t>(rng());
    EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(crc)), crc);
  }
}

TEST(Crc32c, EmptyInputLeavesCrcUnchanged) {
  EXPECT_EQ(Crc32c(nullptr, 0), 0u);
  EXPECT_EQ(Crc32c("", 0, 0x12345678u), 0x12345678u);
  EXPECT_EQ(Crc32cSoftware(nullptr, 0, 0xDEADBEEFu), 0xDEADBEEFu);
}

TEST(Crc32c, ExtendEqualsWhole) {
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(1000);
  for (uint8_t& b : buf) b = static_cast<uint8_t>(rng());
  const uint32_t whole = Crc32c(buf.data(), buf.size());
  for (size_t split : {0, 1, 7, 8, 9, 500, 999, 1000}) {
    const uint32_t a = Crc32c(buf.data(), split);
    EXPECT_EQ(Crc32c(buf.data() + split, buf.size() - split, a), whole)
        << "split at " << split;
  }
}

TEST(Crc32c, DetectsEverySingleBitFlip) {
  std::vector<uint8_t> buf(64, 0x5A);
  const uint32_t good = Crc32c(buf.data(), buf.size());
  for (size_t bit = 0; bit < buf.size() * 8; ++bit) {
    buf[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    EXPECT_NE(Crc32c(buf.data(), buf.size()), good) << "bit " << bit;
    buf[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  }
}

TEST(Crc32c, HardwareMatchesSoftwareAtEveryLengthAndAlignment) {
  if (!HaveHardwareCrc32c()) GTEST_SKIP() << "CPU has no SSE4.2";
  std::mt19937 rng(42);
  std::vector<uint8_t> buf(4096 + 16);
  for (uint8_t& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t offset = 0; offset < 16; ++offset) {
    for (size_t n = 0; n <= 300; ++n) {
      const uint32_t seed = static_cast<uint32_t>(rng());
      ASSERT_EQ(Crc32cHardware(buf.data() + offset, n, seed),
                Crc32cSoftware(buf.data() + offset, n, seed))
          << "offset " << offset << " length " << n;
    }
    ASSERT_EQ(Crc32cHardware(buf.data() + offset, 4096, 0),
              Crc32cSoftware(buf.data() + offset, 4096, 0));
  }
}

}  // namespace
}  // namespace cohort

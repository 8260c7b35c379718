#include "common/safetensors.h"

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A file of the raw header `json` (padded to 8 bytes) and `data_bytes`
// bytes of data.
std::string FileWithHeader(std::string json, size_t data_bytes) {
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out;
  for (int i = 0; i < 8; ++i) {
    out += static_cast<char>((json.size() >> (8 * i)) & 0xff);
  }
  return out + json + std::string(data_bytes, '\0');
}

// The message of a refused file, checked to be one line naming it.
std::string Refusal(const std::string& bytes,
                    const std::string& path = "m.safetensors") {
  absl::StatusOr<SafetensorsFile> f = ParseSafetensors(bytes, path);
  if (f.ok()) return "OK";
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  const std::string m(f.status().message());
  EXPECT_FALSE(absl::StrContains(m, "\n")) << m;
  EXPECT_FALSE(absl::StrContains(m, std::string(1, '\0'))) << m;
  return m;
}

TEST(Safetensors, WrittenFilesReadBack) {
  SafeTensor a{"layer.weight", "F32", {2}, std::string(8, '\x01')};
  SafeTensor b{"layer.bias", "F16", {1}, std::string(2, '\x02')};
  absl::StatusOr<SafetensorsFile> f =
      ParseSafetensors(SafetensorsBytes({a, b}, {{"format", "pt"}}), "m");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->metadata.at("format"), "pt");
  EXPECT_EQ(f->tensors.at("layer.weight").bytes, a.bytes);
  EXPECT_EQ(f->tensors.at("layer.bias").shape, std::vector<int64_t>{1});
}

// Metadata nested 10,000 arrays deep took seconds (a million, minutes) and
// was accepted; it is refused at once now.
TEST(Safetensors, DeeplyNestedHeaderIsRefusedQuickly) {
  const int depth = 10000;
  const std::string json =
      absl::StrCat("{\"__metadata__\": {\"k\": ", std::string(depth, '['),
                   std::string(depth, ']'), "}}");
  const auto start = std::chrono::steady_clock::now();
  const std::string m = Refusal(FileWithHeader(json, 0));
  EXPECT_LT(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count(),
      0.5);
  EXPECT_EQ(m,
            "m.safetensors: not a valid safetensors file: its JSON header is "
            "malformed at byte 85: arrays and objects nest deeper than 64 "
            "levels");
}

// The JSON error is one line and echoes none of the header's bytes.
TEST(Safetensors, MalformedJsonIsOneLineWithoutTheHeadersBytes) {
  const std::string m =
      Refusal(FileWithHeader("{\"w\": {\"dtype\": \"F32\",\n SECRET\n}}", 0));
  EXPECT_EQ(m,
            "m.safetensors: not a valid safetensors file: its JSON header is "
            "malformed at byte 24: a key (a string) expected, not 'S'");
  EXPECT_THAT(m, Not(HasSubstr("SECRET")));
  EXPECT_EQ(Refusal(FileWithHeader("[1]", 0)),
            "m.safetensors: not a valid safetensors file: its header is not a "
            "JSON object");
  EXPECT_EQ(Refusal(FileWithHeader("{\"__metadata__\": {\"k\": 1}}", 0)),
            "m.safetensors: not a valid safetensors file: __metadata__ value "
            "\"k\" is not a string");
}

TEST(Safetensors, OverlappingTensorsAreRefusedByName) {
  const std::string json =
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
      " \"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]},"
      " \"e\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 4]}}";
  EXPECT_EQ(Refusal(FileWithHeader(json, 24)),
            "m.safetensors: not a valid safetensors file: tensors \"a\" [0, "
            "16) and \"b\" [8, 24) overlap in the data");
  // One tensor inside a larger one, listed first.
  const std::string inside =
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [8], \"data_offsets\": [0, 32]},"
      " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]},"
      " \"c\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [16, "
      "20]}}";
  EXPECT_THAT(Refusal(FileWithHeader(inside, 32)),
              HasSubstr("tensors \"a\" [0, 32) and \"b\" [4, 8) overlap"));
  // Back to back, and an empty tensor anywhere, is fine.
  const std::string adjacent =
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
      " \"e\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 4]},"
      " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, "
      "16]}}";
  EXPECT_EQ(Refusal(FileWithHeader(adjacent, 16)), "OK");
}

TEST(Safetensors, DuplicateTensorNamesAreRefused) {
  const std::string json =
      "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
      " \"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}";
  EXPECT_EQ(Refusal(FileWithHeader(json, 8)),
            "m.safetensors: not a valid safetensors file: its JSON header is "
            "malformed at byte 62: the key \"w\" appears twice in one object");
}

// Names from the file (and the file's own name) are escaped, never raw.
TEST(Safetensors, NamesInMessagesAreEscaped) {
  const std::string json =
      "{\"a\\nb\\u0000\": {\"dtype\": \"X\\r\", \"shape\": [1], "
      "\"data_offsets\": [0, 4]}}";
  EXPECT_EQ(Refusal(FileWithHeader(json, 4), "dir\n/m.safetensors"),
            "\"dir\\n/m.safetensors\": not a valid safetensors file: tensor "
            "\"a\\nb\\x00\" has unknown dtype \"X\\r\"");
}

}  // namespace
}  // namespace cohort

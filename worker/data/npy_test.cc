#include "worker/data/npy.h"

#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/quote.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/data/numpy_dataset.h"
#include "worker/data/test_util.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

// A .npy file as NumPy writes it (version 1.0, header padded to 64 bytes).
std::vector<uint8_t> Npy(const std::string& descr,
                         const std::vector<int64_t>& shape, const void* data,
                         size_t bytes, bool fortran = false) {
  std::string dims;
  for (int64_t d : shape) absl::StrAppend(&dims, d, ", ");
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string dict = absl::StrCat(
      "{'descr': '", descr, "', 'fortran_order': ", fortran ? "True" : "False",
      ", 'shape': (", dims, "), }");
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.push_back(dict.size() & 0xff);
  out.push_back(dict.size() >> 8);
  out.insert(out.end(), dict.begin(), dict.end());
  const uint8_t* p = static_cast<const uint8_t*>(data);
  out.insert(out.end(), p, p + bytes);
  return out;
}

std::string Write(const std::string& dir, const std::string& name,
                  const std::vector<uint8_t>& bytes) {
  const std::string path = dir + "/" + name;
  WriteFile(path, bytes);
  return path;
}

TEST(Npy, ReadsEveryDtypeAndShape) {
  const std::string dir = MakeTempDir();
  const std::vector<float> f = {1.5f, -2, 3, 4, 5, 6};
  auto a =
      NpyArray::Open(Write(dir, "f.npy", Npy("<f4", {2, 3}, f.data(), 24)));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->type(), NpyType::kFloat32);
  EXPECT_EQ((*a)->shape(), (std::vector<int64_t>{2, 3}));
  float got[6];
  std::memcpy(got, (*a)->data(), 24);
  EXPECT_EQ(got[0], 1.5f);
  EXPECT_EQ(got[5], 6.0f);
  const std::vector<int64_t> y = {0, 9, 3};
  auto b = NpyArray::Open(Write(dir, "y.npy", Npy("<i8", {3}, y.data(), 24)));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->type(), NpyType::kInt64);
  EXPECT_EQ((*b)->shape(), (std::vector<int64_t>{3}));
}

TEST(Npy, HalfPrecisionConvertsExactly) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // subnormal
  EXPECT_EQ(HalfToFloat(0x0200), std::ldexp(1.0f, -15));
  EXPECT_EQ(HalfToFloat(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
  EXPECT_EQ(HalfToFloat(0x8000), -0.0f);
}

TEST(Npy, RefusesWhatItCannotReadByName) {
  const std::string dir = MakeTempDir();
  const std::vector<float> f(4, 1.0f);
  struct Case {
    std::vector<uint8_t> bytes;
    std::string want;
  } cases[] = {
      {Npy(">f4", {4}, f.data(), 16), "big-endian"},
      {Npy("<c8", {2}, f.data(), 16), "dtype '<c8' is not supported"},
      {Npy("<f4", {2, 2}, f.data(), 16, /*fortran=*/true), "Fortran order"},
      {Npy("<f4", {5}, f.data(), 16), "(truncated)"},
      {Npy("<f4", {3}, f.data(), 16), "(trailing bytes)"},
      {{'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0}, "does not start with"},
      {Npy("<f4", {4611686018427387904, 4}, f.data(), 16), "too large"},
  };
  for (const Case& c : cases) {
    const std::string path = Write(dir, "bad.npy", c.bytes);
    auto a = NpyArray::Open(path);
    ASSERT_FALSE(a.ok()) << c.want;
    EXPECT_THAT(std::string(a.status().message()), HasSubstr(c.want));
    EXPECT_THAT(std::string(a.status().message()), HasSubstr(path));
  }
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  WriteFile(path, std::vector<uint8_t>(bytes.begin(), bytes.end()));
}

// A .npy file whose header dict is `dict` exactly (format 1.0, or 2.0 for
// a header past 64 KiB), then `data`.
std::string NpyWithDict(const std::string& dict, const std::string& data) {
  const bool v2 = dict.size() > 0xffff;
  std::string out("\x93NUMPY", 6);
  out += v2 ? '\x02' : '\x01';
  out += '\0';
  for (int i = 0; i < (v2 ? 4 : 2); ++i) {
    out += static_cast<char>((dict.size() >> (8 * i)) & 0xff);
  }
  return out + dict + data;
}

// The message of a refused .npy file, checked to be one line naming it.
std::string NpyRefusal(const std::string& path) {
  auto a = NpyArray::Open(path);
  if (a.ok()) return "OK";
  const std::string m(a.status().message());
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_NE(m.find(QuoteName(path)), std::string::npos) << m;
  return m;
}

// NumPy keeps the last of two equal keys, cohort took the first: the same
// file would be two different arrays.
TEST(Npy, DuplicateHeaderKeysAreRefusedByName) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/dup.npy";
  WriteBytes(path, NpyWithDict("{'descr': '<f4', 'fortran_order': False, "
                               "'shape': (4,), 'descr': '<i4', }\n",
                               std::string(16, '\0')));
  EXPECT_EQ(NpyRefusal(path), path +
                                  ": not a valid .npy file: its header has the "
                                  "key 'descr' twice");
  WriteBytes(path, NpyWithDict("{'descr': '<f4', 'fortran_order': False, "
                               "'shape': (4,), 'strides': (4,)}",
                               std::string(16, '\0')));
  EXPECT_EQ(NpyRefusal(path), path +
                                  ": not a valid .npy file: its header has an "
                                  "unknown key 'strides'");
  // A key inside a value is no key: the dict is read entry by entry.
  WriteBytes(path, NpyWithDict("{\"descr\": \"<f4\", \"shape\": (4,), "
                               "\"fortran_order\": False}   \n",
                               std::string(16, '\0')));
  EXPECT_EQ(NpyRefusal(path), "OK");
}

// A header of 100 MB is called what it is, with its size and the limit,
// not a corrupt length field.
TEST(Npy, LargeHeaderIsTooLargeNotCorrupt) {
  std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
  dict.resize(100 << 20, ' ');
  dict.back() = '\n';
  const absl::StatusOr<NpyHeader> h =
      ParseNpyHeader(NpyWithDict(dict, std::string(4, '\0')), "big.npy");
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h.status().message(),
            "big.npy: its header is 104857600 bytes, larger than the 65536 "
            "this reader accepts (NumPy writes a few hundred for the dtypes "
            "cohort reads)");
}

TEST(Npy, FileNamesAndDtypesAreEscapedInOneLine) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/x\ncohort train: done.npy";
  const std::vector<float> f(4, 1.0f);
  WriteFile(path, Npy("<f4", {5}, f.data(), 16));
  EXPECT_EQ(NpyRefusal(path),
            "\"" + dir +
                "/x\\ncohort train: done.npy\": 144 bytes where its header "
                "(float32, shape (5)) implies 148 (truncated)");
  WriteFile(path, Npy("<\x01\n", {4}, f.data(), 16));
  EXPECT_THAT(NpyRefusal(path), HasSubstr(": dtype '<\\x01\\n' is not"));
}

// A .npz archive of stored members `members` (name, bytes), as np.savez
// writes one.
std::string StoredZip(
    const std::vector<std::pair<std::string, std::string>>& members) {
  const auto le = [](uint64_t v, int bytes) {
    std::string s;
    for (int i = 0; i < bytes; ++i)
      s += static_cast<char>((v >> (8 * i)) & 0xff);
    return s;
  };
  std::string out, directory;
  for (const auto& [name, bytes] : members) {
    const uint32_t crc =
        crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size());
    const std::string common = absl::StrCat(
        le(0, 2), le(0, 2), le(0, 4), le(crc, 4), le(bytes.size(), 4),
        le(bytes.size(), 4), le(name.size(), 2), le(0, 2));
    directory +=
        absl::StrCat(le(0x02014b50, 4), le(20, 2), le(20, 2), common, le(0, 2),
                     le(0, 2), le(0, 2), le(0, 4), le(out.size(), 4), name);
    out += absl::StrCat(le(0x04034b50, 4), le(20, 2), common, name, bytes);
  }
  return absl::StrCat(out, directory, le(0x06054b50, 4), le(0, 4),
                      le(members.size(), 2), le(members.size(), 2),
                      le(directory.size(), 4), le(out.size(), 4), le(0, 2));
}

std::string NpyString(const std::vector<float>& v) {
  return NpyFloat32Bytes({static_cast<int64_t>(v.size())}, v.data());
}

// Two members "x.npy": cohort trained on the first, NumPy's np.load reads
// the last. Neither is guessed.
TEST(Npz, DuplicateMembersAreRefusedByName) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/d.npz";
  WriteBytes(path, StoredZip({{"x.npy", NpyString({1, 2})},
                              {"y.npy", NpyString({3, 4})}}));
  auto ok = NpyArray::OpenInArchive(path, "x");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->path(), path + ":x.npy");
  WriteBytes(path, StoredZip({{"x.npy", NpyString({1, 2})},
                              {"y.npy", NpyString({3, 4})},
                              {"x.npy", NpyString({5, 6})}}));
  auto a = NpyArray::OpenInArchive(path, "x");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(a.status().message(),
            path +
                ": not a valid .npz (ZIP) archive: two members are named "
                "x.npy");
  WriteBytes(path, StoredZip({{"a\nb.npy", NpyString({1, 2})}}));
  EXPECT_EQ(NpyArray::OpenInArchive(path, "x").status().message(),
            path + " has no array \"x.npy\" (it holds: \"a\\nb.npy\")");
}

// A two-shard split with uint8 and float16 inputs: samples come back in
// order across shards, converted to float, with their labels.
TEST(NumpyDataset, ConcatenatesShardsAndConverts) {
  const std::string dir = MakeTempDir();
  const std::vector<uint8_t> x0 = {0, 255, 51, 102};  // 2 samples of [2]
  const std::vector<uint8_t> y0 = {1, 0};
  const std::vector<uint16_t> x1 = {0x3c00, 0xc000};  // 1 sample: 1, -2
  const std::vector<int32_t> y1 = {2};
  Write(dir, "x0.npy", Npy("|u1", {2, 2}, x0.data(), 4));
  Write(dir, "y0.npy", Npy("|u1", {2}, y0.data(), 2));
  Write(dir, "x1.npy", Npy("<f2", {1, 2}, x1.data(), 4));
  Write(dir, "y1.npy", Npy("<i4", {1}, y1.data(), 4));
  DatasetSpec spec;
  spec.set_kind(DatasetSpec::NUMPY);
  NumpySpec* n = spec.mutable_numpy();
  n->add_shape(2);
  n->set_classes(3);
  for (const char* f : {"x0.npy", "x1.npy"}) n->add_train_x(f);
  for (const char* f : {"y0.npy", "y1.npy"}) n->add_train_y(f);
  n->add_test_x("x1.npy");
  n->add_test_y("y1.npy");
  auto splits = LoadNumpy(spec, dir);
  ASSERT_TRUE(splits.ok()) << splits.status();
  ASSERT_EQ(splits->train->size(), 3);
  EXPECT_EQ(splits->test->size(), 1);
  float out[2];
  EXPECT_EQ(LabelOf(*splits->train, 0, out), 1);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(LabelOf(*splits->train, 1, out), 0);
  EXPECT_FLOAT_EQ(out[0], 0.2f);
  EXPECT_EQ(LabelOf(*splits->train, 2, out), 2);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);

  // A label outside [0, classes) names the file and the index.
  n->set_classes(2);
  auto bad = LoadNumpy(spec, dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("y1.npy: label 2 at index 0 is outside"));
  // Inputs of another per-sample shape.
  n->set_classes(3);
  n->set_shape(0, 3);
  bad = LoadNumpy(spec, dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("x0.npy: inputs of shape (2, 2)"));
  // Label and input counts that disagree.
  n->set_shape(0, 2);
  n->set_train_y(0, "y1.npy");
  bad = LoadNumpy(spec, dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("y1.npy: labels of shape (1) for 2 inputs"));
}

}  // namespace
}  // namespace cohort

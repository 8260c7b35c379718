#include "worker/data/tokens_dataset.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/data/test_util.h"

namespace cohort {
namespace {

DatasetSpec Spec(const std::string& train, int context) {
  DatasetSpec d;
  d.set_kind(DatasetSpec::TOKENS);
  d.mutable_tokens()->set_train(train);
  d.mutable_tokens()->set_context(context);
  return d;
}

std::vector<uint8_t> Bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

// The ids of window `i`'s inputs and targets, as ints.
void ReadWindow(const Dataset& d, int64_t i, std::vector<int>* x,
                std::vector<int>* y) {
  const int64_t n = d.target_shape()[0];
  std::vector<float> fx(n), fy(n);
  SampleOut out;
  out.features = fx.data();
  out.target = fy.data();
  ASSERT_TRUE(d.Read(i, 0, out).ok());
  x->assign(fx.begin(), fx.end());
  y->assign(fy.begin(), fy.end());
}

TEST(TokensDataset, CutsTextIntoShiftedWindowsAndHoldsOutTheTail) {
  const std::string dir = MakeTempDir();
  // 40 bytes; the last 10% (4 bytes) is the test split.
  WriteFile(dir + "/a.txt", Bytes("0123456789abcdefghijklmnopqrstuvwxyzABCD"));
  absl::StatusOr<DataSplits> s = LoadTokens(Spec("a.txt", 8), dir);
  ASSERT_FALSE(s.ok());  // 4 held-out tokens cannot fill a window of 8 + 1
  EXPECT_NE(s.status().message().find("fewer than one window needs"),
            std::string::npos)
      << s.status();
  DatasetSpec spec = Spec("a.txt", 3);
  s = LoadTokens(spec, dir);
  ASSERT_TRUE(s.ok()) << s.status();
  const Dataset& train = *s->train;
  EXPECT_EQ(train.sample_shape(), Shape({1, 3}));
  EXPECT_EQ(train.target_shape(), Shape({3}));
  EXPECT_EQ(train.num_classes(), 256);
  EXPECT_TRUE(train.token_targets());
  // 36 training tokens, windows of 3 every 3 that keep their next token
  // inside the split: starts 0, 3, ..., 30 (33 would need token 36).
  EXPECT_EQ(train.size(), 11);
  std::vector<int> x, y;
  ReadWindow(train, 1, &x, &y);
  EXPECT_EQ(x, std::vector<int>({'3', '4', '5'}));
  EXPECT_EQ(y, std::vector<int>({'4', '5', '6'}));
  EXPECT_EQ(s->test->size(), 1);
  ReadWindow(*s->test, 0, &x, &y);
  EXPECT_EQ(x, std::vector<int>({'A', 'B', 'C'}));
  EXPECT_EQ(y, std::vector<int>({'B', 'C', 'D'}));
  // Overlapping windows and a limit.
  spec.mutable_tokens()->set_stride(1);
  spec.set_train_limit(5);
  s = LoadTokens(spec, dir);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->train->size(), 5);
  ReadWindow(*s->train, 4, &x, &y);
  EXPECT_EQ(x, std::vector<int>({'4', '5', '6'}));
}

TEST(TokensDataset, ReadsUint16IdsRawAndAsNpyAndChecksTheVocabulary) {
  const std::string dir = MakeTempDir();
  std::vector<uint8_t> raw;
  for (uint16_t id = 0; id < 20; ++id) {
    const uint16_t v = id * 1000;
    raw.push_back(v & 0xff);
    raw.push_back(v >> 8);
  }
  WriteFile(dir + "/train.bin", raw);
  WriteFile(dir + "/test.bin", raw);
  DatasetSpec spec = Spec("train.bin", 4);
  spec.mutable_tokens()->set_test("test.bin");
  spec.mutable_tokens()->set_format(TokensSpec::UINT16);
  spec.mutable_tokens()->set_vocab_size(19000);
  absl::StatusOr<DataSplits> s = LoadTokens(spec, dir);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            dir +
                "/train.bin: token 19 is 19000, outside the vocabulary "
                "[0, 19000) (data.tokens.vocab_size)");
  spec.mutable_tokens()->set_vocab_size(19001);
  s = LoadTokens(spec, dir);
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<int> x, y;
  ReadWindow(*s->train, 2, &x, &y);
  EXPECT_EQ(x, std::vector<int>({8000, 9000, 10000, 11000}));
  EXPECT_EQ(y, std::vector<int>({9000, 10000, 11000, 12000}));

  // The same ids as a .npy array (NumPy's v1 header for '<u2', (20,)).
  std::string header =
      "{'descr': '<u2', 'fortran_order': False, 'shape': (20,), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::vector<uint8_t> npy = Bytes(std::string("\x93NUMPY\x01\x00", 8));
  npy.push_back(header.size() & 0xff);
  npy.push_back(header.size() >> 8);
  npy.insert(npy.end(), header.begin(), header.end());
  npy.insert(npy.end(), raw.begin(), raw.end());
  WriteFile(dir + "/train.npy", npy);
  spec.mutable_tokens()->set_train("train.npy");
  s = LoadTokens(spec, dir);
  ASSERT_TRUE(s.ok()) << s.status();
  ReadWindow(*s->train, 2, &x, &y);
  EXPECT_EQ(x, std::vector<int>({8000, 9000, 10000, 11000}));

  // A raw file cut mid-id.
  raw.pop_back();
  WriteFile(dir + "/odd.bin", raw);
  spec.mutable_tokens()->set_train("odd.bin");
  s = LoadTokens(spec, dir);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            dir +
                "/odd.bin: 39 bytes is not a whole number of UINT16 ids "
                "(2 bytes each)");
  spec.mutable_tokens()->set_train("missing.bin");
  EXPECT_EQ(LoadTokens(spec, dir).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace cohort

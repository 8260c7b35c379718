#include "fuzz/dataset_checks.h"

#include <zlib.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fuzz/fuzz_util.h"

namespace cohort {
namespace fuzz {
namespace {

constexpr int kClasses = 10;
constexpr int64_t kMaxSamplesChecked = 64;

void CheckSet(const Dataset* set, absl::string_view which, const Shape& shape,
              int64_t size) {
  FUZZ_CHECK(set != nullptr, absl::StrCat(which, " set missing"));
  FUZZ_CHECK(set->size() == size, absl::StrCat(which, " set has ", set->size(),
                                               " samples, expected ", size));
  FUZZ_CHECK(set->sample_shape() == shape,
             absl::StrCat(which, " set has the wrong sample shape"));
  FUZZ_CHECK(set->num_classes() == kClasses,
             absl::StrCat(which, " set has ", set->num_classes(), " classes"));
  std::vector<float> features(NumElements(shape));
  for (int64_t i = 0; i < set->size() && i < kMaxSamplesChecked; ++i) {
    SampleOut out;
    out.features = features.data();
    const absl::Status read = set->Read(i, /*draw=*/0, out);
    FUZZ_CHECK(read.ok(),
               absl::StrCat(which, " sample ", i, ": ", read.ToString()));
    const int32_t label = out.label;
    FUZZ_CHECK(label >= 0 && label < kClasses,
               absl::StrCat(which, " sample ", i, " has label ", label));
    for (float f : features) {
      FUZZ_CHECK(std::isfinite(f),
                 absl::StrCat(which, " sample ", i, " has a feature ", f));
    }
  }
}

}  // namespace

void CheckSplits(const DataSplits& splits, const Shape& shape,
                 int64_t train_size, int64_t test_size) {
  CheckSet(splits.train.get(), "train", shape, train_size);
  CheckSet(splits.test.get(), "test", shape, test_size);
}

void CheckReaderError(const absl::Status& s, absl::string_view dir) {
  FUZZ_CHECK(s.code() == absl::StatusCode::kDataLoss ||
                 s.code() == absl::StatusCode::kNotFound,
             Describe("reader error is not DATA_LOSS or NOT_FOUND", s));
  FUZZ_CHECK(absl::StrContains(s.message(), dir),
             Describe("reader error does not name the directory", s));
}

std::string Gzip(absl::string_view bytes) {
  z_stream s;
  std::memset(&s, 0, sizeof(s));
  // 16 + MAX_WBITS: write the gzip wrapper, as gzip(1) does.
  FUZZ_CHECK(deflateInit2(&s, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8,
                          Z_DEFAULT_STRATEGY) == Z_OK,
             "deflateInit2");
  std::string out(deflateBound(&s, bytes.size()), '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  s.avail_in = static_cast<uInt>(bytes.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&s, Z_FINISH);
  out.resize(s.total_out);
  deflateEnd(&s);
  FUZZ_CHECK(rc == Z_STREAM_END, "deflate did not finish");
  return out;
}

}  // namespace fuzz
}  // namespace cohort

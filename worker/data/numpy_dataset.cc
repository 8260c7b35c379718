#include "worker/data/numpy_dataset.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

std::string Resolve(const std::string& dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || dir.empty()) return path;
  return absl::StrCat(dir, "/", path);
}

int64_t LabelAt(const NpyArray& y, int64_t i) {
  const uint8_t* p = y.data();
  switch (y.type()) {
    case NpyType::kUint8:
      return p[i];
    case NpyType::kInt32: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case NpyType::kInt64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    }
    default:
      return -1;
  }
}

absl::Status CheckInputs(const NpyArray& x, const Shape& shape) {
  if (x.type() == NpyType::kInt32 || x.type() == NpyType::kInt64) {
    return absl::InvalidArgumentError(
        absl::StrCat(x.path(), ": inputs are ", NpyTypeName(x.type()),
                     "; use float32, float16 or uint8"));
  }
  const std::vector<int64_t>& s = x.shape();
  if (s.size() != shape.size() + 1 ||
      !std::equal(shape.begin(), shape.end(), s.begin() + 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(x.path(), ": inputs of shape ", ShapeText(s),
                     " where data.numpy.shape asks for (N, ",
                     absl::StrJoin(shape, ", "), ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckLabels(const NpyArray& y, int64_t count, int classes) {
  if (y.type() != NpyType::kUint8 && y.type() != NpyType::kInt32 &&
      y.type() != NpyType::kInt64) {
    return absl::InvalidArgumentError(absl::StrCat(
        y.path(), ": labels are ", NpyTypeName(y.type()),
        "; class labels must be integers (int64, int32 or uint8)"));
  }
  if (y.shape().size() != 1 || y.shape()[0] != count) {
    return absl::InvalidArgumentError(
        absl::StrCat(y.path(), ": labels of shape ", ShapeText(y.shape()),
                     " for ", count, " inputs; want (", count, ",)"));
  }
  for (int64_t i = 0; i < count; ++i) {
    const int64_t label = LabelAt(y, i);
    if (label < 0 || label >= classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(y.path(), ": label ", label, " at index ", i,
                       " is outside [0, data.numpy.classes = ", classes, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Dataset>> LoadSplit(
    const NumpySpec& n, const std::string& dir,
    const google::protobuf::RepeatedPtrField<std::string>& xs,
    const google::protobuf::RepeatedPtrField<std::string>& ys, int64_t limit) {
  const Shape shape(n.shape().begin(), n.shape().end());
  std::vector<NumpyDataset::Shard> shards;
  for (int i = 0; i < xs.size(); ++i) {
    NumpyDataset::Shard s;
    ASSIGN_OR_RETURN(s.x, NpyArray::Open(Resolve(dir, xs[i])));
    ASSIGN_OR_RETURN(s.y, NpyArray::Open(Resolve(dir, ys[i])));
    RETURN_IF_ERROR(CheckInputs(*s.x, shape));
    RETURN_IF_ERROR(CheckLabels(*s.y, s.x->shape()[0], n.classes()));
    shards.push_back(std::move(s));
  }
  return std::unique_ptr<Dataset>(
      new NumpyDataset(shape, n.classes(), std::move(shards), limit));
}

}  // namespace

absl::StatusOr<DataSplits> LoadNumpy(const DatasetSpec& spec,
                                     const std::string& dir) {
  const NumpySpec& n = spec.numpy();
  DataSplits splits;
  ASSIGN_OR_RETURN(splits.train, LoadSplit(n, dir, n.train_x(), n.train_y(),
                                           spec.train_limit()));
  ASSIGN_OR_RETURN(splits.test,
                   LoadSplit(n, dir, n.test_x(), n.test_y(), /*limit=*/0));
  if (splits.train->size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.numpy.train_x (", absl::StrJoin(n.train_x(), ", "),
                     ") holds no samples"));
  }
  return splits;
}

NumpyDataset::NumpyDataset(Shape sample_shape, int classes,
                           std::vector<Shard> shards, int64_t limit)
    : shape_(std::move(sample_shape)),
      classes_(classes),
      sample_elements_(NumElements(shape_)),
      shards_(std::move(shards)) {
  for (const Shard& s : shards_) {
    starts_.push_back(size_);
    size_ += s.x->shape()[0];
  }
  starts_.push_back(size_);
  if (limit > 0) size_ = std::min(size_, limit);
}

int32_t NumpyDataset::Get(int64_t index, float* out) const {
  const size_t shard = std::upper_bound(starts_.begin(), starts_.end(), index) -
                       starts_.begin() - 1;
  const Shard& s = shards_[shard];
  const int64_t row = index - starts_[shard];
  const int64_t n = sample_elements_;
  const uint8_t* p = s.x->data() + row * n * NpyItemBytes(s.x->type());
  switch (s.x->type()) {
    case NpyType::kFloat32:
      std::memcpy(out, p, n * sizeof(float));
      break;
    case NpyType::kFloat16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = HalfToFloat(h);
      }
      break;
    case NpyType::kUint8:
      for (int64_t i = 0; i < n; ++i) out[i] = p[i] * (1.0f / 255.0f);
      break;
    default:
      break;  // refused by CheckInputs
  }
  return static_cast<int32_t>(LabelAt(*s.y, row));
}

}  // namespace cohort

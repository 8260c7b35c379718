#include "worker/data/numpy_dataset.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/quote.h"
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
  if (x.type() == NpyType::kInt32 || x.type() == NpyType::kInt64 ||
      x.type() == NpyType::kUint16 || x.type() == NpyType::kUint32) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteName(x.path()), ": inputs are ",
                     NpyTypeName(x.type()), "; use float32, float16 or uint8"));
  }
  const std::vector<int64_t>& s = x.shape();
  if (s.size() != shape.size() + 1 ||
      !std::equal(shape.begin(), shape.end(), s.begin() + 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteName(x.path()), ": inputs of shape ", ShapeText(s),
                     " where data.numpy.shape asks for (N, ",
                     absl::StrJoin(shape, ", "), ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckLabels(const NpyArray& y, int64_t count, int classes) {
  if (y.type() != NpyType::kUint8 && y.type() != NpyType::kInt32 &&
      y.type() != NpyType::kInt64) {
    return absl::InvalidArgumentError(absl::StrCat(
        QuoteName(y.path()), ": labels are ", NpyTypeName(y.type()),
        "; class labels must be integers (int64, int32 or uint8)"));
  }
  if (y.shape().size() != 1 || y.shape()[0] != count) {
    return absl::InvalidArgumentError(absl::StrCat(
        QuoteName(y.path()), ": labels of shape ", ShapeText(y.shape()),
        " for ", count, " inputs; want (", count, ",)"));
  }
  for (int64_t i = 0; i < count; ++i) {
    const int64_t label = LabelAt(y, i);
    if (label < 0 || label >= classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(QuoteName(y.path()), ": label ", label, " at index ", i,
                       " is outside [0, data.numpy.classes = ", classes, ")"));
    }
  }
  return absl::OkStatus();
}

// Float targets: float32 or float16 of shape (count, *target_shape).
absl::Status CheckTargets(const NpyArray& y, int64_t count,
                          const Shape& target_shape) {
  if (y.type() != NpyType::kFloat32 && y.type() != NpyType::kFloat16) {
    return absl::InvalidArgumentError(absl::StrCat(
        QuoteName(y.path()), ": targets are ", NpyTypeName(y.type()),
        "; with data.numpy.target_shape the targets are float32 "
        "or float16 (integer class labels need classes instead)"));
  }
  const std::vector<int64_t>& s = y.shape();
  if (s.size() != target_shape.size() + 1 || s[0] != count ||
      !std::equal(target_shape.begin(), target_shape.end(), s.begin() + 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        QuoteName(y.path()), ": targets of shape ", ShapeText(s), " for ",
        count, " inputs; data.numpy.target_shape asks for (", count, ", ",
        absl::StrJoin(target_shape, ", "), ")"));
  }
  return absl::OkStatus();
}

// A file of a split: "F.npy", or "F.npz" (its member `member`), or
// "F.npz:NAME" (its member NAME).
absl::StatusOr<std::unique_ptr<NpyArray>> OpenArray(const std::string& dir,
                                                    const std::string& file,
                                                    const std::string& member) {
  const size_t colon = file.rfind(':');
  if (colon != std::string::npos &&
      absl::EndsWith(absl::string_view(file).substr(0, colon), ".npz")) {
    return NpyArray::OpenInArchive(Resolve(dir, file.substr(0, colon)),
                                   file.substr(colon + 1));
  }
  if (absl::EndsWith(file, ".npz")) {
    return NpyArray::OpenInArchive(Resolve(dir, file), member);
  }
  return NpyArray::Open(Resolve(dir, file));
}

absl::StatusOr<std::unique_ptr<Dataset>> LoadSplit(
    const NumpySpec& n, const std::string& dir,
    const google::protobuf::RepeatedPtrField<std::string>& xs,
    const google::protobuf::RepeatedPtrField<std::string>& ys, int64_t limit) {
  const Shape shape(n.shape().begin(), n.shape().end());
  const Shape target_shape(n.target_shape().begin(), n.target_shape().end());
  std::vector<NumpyDataset::Shard> shards;
  for (int i = 0; i < xs.size(); ++i) {
    NumpyDataset::Shard s;
    ASSIGN_OR_RETURN(s.x, OpenArray(dir, xs[i], "x"));
    // An archive alone holds both: its "y" is the targets.
    ASSIGN_OR_RETURN(s.y, OpenArray(dir, ys.empty() ? xs[i] : ys[i], "y"));
    RETURN_IF_ERROR(CheckInputs(*s.x, shape));
    RETURN_IF_ERROR(target_shape.empty()
                        ? CheckLabels(*s.y, s.x->shape()[0], n.classes())
                        : CheckTargets(*s.y, s.x->shape()[0], target_shape));
    shards.push_back(std::move(s));
  }
  return std::unique_ptr<Dataset>(new NumpyDataset(
      shape, target_shape, n.classes(), std::move(shards), limit));
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

NumpyDataset::NumpyDataset(Shape sample_shape, Shape target_shape, int classes,
                           std::vector<Shard> shards, int64_t limit)
    : shape_(std::move(sample_shape)),
      target_shape_(std::move(target_shape)),
      classes_(classes),
      sample_elements_(NumElements(shape_)),
      target_elements_(NumElements(target_shape_)),
      shards_(std::move(shards)) {
  for (const Shard& s : shards_) {
    starts_.push_back(size_);
    size_ += s.x->shape()[0];
  }
  starts_.push_back(size_);
  if (limit > 0) size_ = std::min(size_, limit);
}

absl::Status NumpyDataset::Read(int64_t index, uint64_t /*draw*/,
                                SampleOut& out) const {
  const size_t shard = std::upper_bound(starts_.begin(), starts_.end(), index) -
                       starts_.begin() - 1;
  const Shard& s = shards_[shard];
  const int64_t row = index - starts_[shard];
  const int64_t n = sample_elements_;
  const uint8_t* p = s.x->data() + row * n * NpyItemBytes(s.x->type());
  NpyToFloats(s.x->type(), p, n, out.features);  // checked by CheckInputs
  if (target_shape_.empty()) {
    out.label = static_cast<int32_t>(LabelAt(*s.y, row));
  } else {
    const int64_t t = target_elements_;
    NpyToFloats(s.y->type(), s.y->data() + row * t * NpyItemBytes(s.y->type()),
                t, out.target);
  }
  return absl::OkStatus();
}

}  // namespace cohort

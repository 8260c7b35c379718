#include "worker/data/dataset.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/data/cifar10.h"
#include "worker/data/criteo_dataset.h"
#include "worker/data/csv_dataset.h"
#include "worker/data/image_folder_dataset.h"
#include "worker/data/mnist.h"
#include "worker/data/numpy_dataset.h"
#include "worker/data/synthetic.h"
#include "worker/data/tokens_dataset.h"

namespace cohort {
namespace {

absl::StatusOr<DataSplits> LoadSynthetic(const DatasetSpec& spec,
                                         uint64_t job_seed) {
  ASSIGN_OR_RETURN(SyntheticOptions options,
                   SyntheticOptionsFromSpec(spec.synthetic(), job_seed));
  if (spec.train_limit() > 0 && spec.train_limit() < options.train_samples) {
    options.train_samples = spec.train_limit();
  }
  return MakeSyntheticSplits(options);
}

}  // namespace

const Shape& Dataset::target_shape() const {
  static const Shape* const kClassLabels = new Shape();
  return *kClassLabels;
}

const std::vector<int64_t>& Dataset::categorical_rows() const {
  static const std::vector<int64_t>* const kNone = new std::vector<int64_t>();
  return *kNone;
}

absl::Status LabelledDataset::Read(int64_t index, uint64_t /*draw*/,
                                   SampleOut& out) const {
  out.label = Get(index, out.features);
  return absl::OkStatus();
}

absl::StatusOr<DataSplits> LoadDataset(const DatasetSpec& spec,
                                       const std::string& dir_override,
                                       uint64_t job_seed) {
  if (spec.train_limit() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.train_limit is ", spec.train_limit(),
                     ", expected >= 0 (0 keeps every training record)."));
  }
  if (!DatasetSpec::Kind_IsValid(spec.kind())) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.kind ", static_cast<int>(spec.kind()),
                     " is not a known data set kind (SYNTHETIC, MNIST, "
                     "CIFAR10, NUMPY, CSV, IMAGE_FOLDER, TOKENS or CRITEO)."));
  }
  if (spec.kind() == DatasetSpec::SYNTHETIC) {
    return LoadSynthetic(spec, job_seed);
  }
  const std::string& dir = dir_override.empty() ? spec.dir() : dir_override;
  // Their files name their own paths (relative to the directory if one is
  // given), so they need no directory.
  if (spec.kind() == DatasetSpec::NUMPY) return LoadNumpy(spec, dir);
  if (spec.kind() == DatasetSpec::CSV) return LoadCsv(spec, dir);
  if (spec.kind() == DatasetSpec::TOKENS) return LoadTokens(spec, dir);
  if (spec.kind() == DatasetSpec::CRITEO) return LoadCriteo(spec, dir);
  const std::string kind = DatasetSpec::Kind_Name(spec.kind());
  if (dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.dir is empty: the ", kind,
        " data set needs a directory (set data.dir or pass --data-dir)."));
  }
  if (spec.kind() == DatasetSpec::IMAGE_FOLDER) {
    return LoadImageFolder(spec, dir);
  }
  if (spec.kind() == DatasetSpec::MNIST) {
    return LoadMnist(dir, !spec.no_normalize(), spec.train_limit());
  }
  return LoadCifar10(dir, !spec.no_normalize(), spec.train_limit());
}

}  // namespace cohort

#include "worker/data/image_folder_dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/quote.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "worker/data/file_reader.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

// An image file larger than this is not a training image (and would be
// read whole).
constexpr int64_t kMaxImageFileBytes = int64_t{64} << 20;

bool IsImageName(const std::string& name) {
  const std::string lower = absl::AsciiStrToLower(name);
  return absl::EndsWith(lower, ".jpg") || absl::EndsWith(lower, ".jpeg") ||
         absl::EndsWith(lower, ".png");
}

// The sorted names of `dir`'s entries that are folders (`folders`) or
// image files, hidden ones (".x") left out.
absl::StatusOr<std::vector<std::string>> List(const std::string& dir,
                                              bool folders) {
  RETURN_IF_ERROR(CheckDirReadable(dir));
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  std::vector<std::string> names;
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code type_ec;  // follows symlinks; a dangling one is skipped
    if (folders ? it->is_directory(type_ec)
                : it->is_regular_file(type_ec) && IsImageName(name)) {
      names.push_back(name);
    }
  }
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot list ", QuoteName(dir), ": ", ec.message()));
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The files of one split: every class folder of `split` must be one of
// `classes` (its label is its position there) and hold images.
absl::StatusOr<std::vector<ImageFile>> IndexSplit(
    const std::string& split, const std::vector<std::string>& classes) {
  ASSIGN_OR_RETURN(const std::vector<std::string> folders, List(split, true));
  if (folders.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteName(split), " holds no class folders (want ",
                     QuoteName(split + "/CLASS/*.jpg"), ")"));
  }
  std::vector<ImageFile> files;
  for (const std::string& folder : folders) {
    auto it = std::lower_bound(classes.begin(), classes.end(), folder);
    if (it == classes.end() || *it != folder) {
      return absl::InvalidArgumentError(
          absl::StrCat(QuoteName(absl::StrCat(split, "/", folder)),
                       ": a class folder the training folder does not have"));
    }
    const std::string path = absl::StrCat(split, "/", folder);
    ASSIGN_OR_RETURN(const std::vector<std::string> names, List(path, false));
    if (names.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(QuoteName(path),
                       ": an empty class folder (no .jpg, .jpeg or "
                       ".png file)"));
    }
    for (const std::string& name : names) {
      files.push_back({absl::StrCat(path, "/", name),
                       static_cast<int32_t>(it - classes.begin())});
    }
  }
  return files;
}

// Holds out `fraction` of each class (every file where floor(i * fraction)
// steps, spread evenly and the same on every machine) into `val`.
void HoldOut(float fraction, std::vector<ImageFile>* train,
             std::vector<ImageFile>* val) {
  std::vector<ImageFile> kept;
  int64_t i = 0;
  for (size_t k = 0; k < train->size(); ++k, ++i) {
    if (k > 0 && (*train)[k].label != (*train)[k - 1].label) i = 0;
    const bool held = static_cast<int64_t>((i + 1) * double{fraction}) >
                      static_cast<int64_t>(i * double{fraction});
    (held ? val : &kept)->push_back(std::move((*train)[k]));
  }
  *train = std::move(kept);
}

absl::StatusOr<std::vector<std::string>> TrainClasses(
    const std::string& train, const ImageFolderSpec& f) {
  if (!IsDir(train)) {
    return absl::NotFoundError(absl::StrCat(
        QuoteName(train), ": no such folder (data.image_folder.train; want ",
        QuoteName(train + "/CLASS/*.jpg"), ")"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> classes, List(train, true));
  if (!classes.empty() && static_cast<int>(classes.size()) != f.classes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        QuoteName(train), " has ", classes.size(), " class folders (",
        absl::StrJoin(classes.begin(),
                      classes.begin() + std::min<size_t>(classes.size(), 5),
                      ", ",
                      [](std::string* out, const std::string& c) {
                        out->append(QuoteName(c));
                      }),
        classes.size() > 5 ? ", ..." : "",
        ") but data.image_folder.classes is ", f.classes()));
  }
  return classes;
}

// Reads a whole image file, DataLoss naming it on any failure.
absl::StatusOr<std::string> ReadImageFile(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(
      std::fopen(path.c_str(), "rb"), std::fclose);
  struct stat st;
  if (f == nullptr || fstat(fileno(f.get()), &st) != 0) {
    return absl::DataLossError(
        absl::StrCat(QuoteName(path), ": cannot read: ", std::strerror(errno)));
  }
  if (st.st_size > kMaxImageFileBytes) {
    return absl::DataLossError(absl::StrCat(
        QuoteName(path), ": ", st.st_size,
        " bytes, larger than an image file may be (", kMaxImageFileBytes, ")"));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  if (std::fread(bytes.data(), 1, bytes.size(), f.get()) != bytes.size()) {
    return absl::DataLossError(absl::StrCat(QuoteName(path), ": short read"));
  }
  return bytes;
}

}  // namespace

absl::StatusOr<DataSplits> LoadImageFolder(const DatasetSpec& spec,
                                           const std::string& dir) {
  ImageFolderSpec f = spec.image_folder();
  FillImageFolderDefaults(&f);
  const std::string train_dir = absl::StrCat(dir, "/", f.train());
  const std::string val_dir = absl::StrCat(dir, "/", f.val());
  ASSIGN_OR_RETURN(const std::vector<std::string> classes,
                   TrainClasses(train_dir, f));
  ASSIGN_OR_RETURN(std::vector<ImageFile> train,
                   IndexSplit(train_dir, classes));
  std::vector<ImageFile> val;
  if (IsDir(val_dir)) {
    ASSIGN_OR_RETURN(val, IndexSplit(val_dir, classes));
  } else if (f.val_fraction() > 0) {
    HoldOut(f.val_fraction(), &train, &val);
    if (val.empty() || train.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("data.image_folder.val_fraction ", f.val_fraction(),
                       " leaves ", train.size(), " training and ", val.size(),
                       " validation images in ", QuoteName(train_dir)));
    }
  } else {
    return absl::NotFoundError(
        absl::StrCat(QuoteName(val_dir),
                     ": no such folder; add one or set "
                     "data.image_folder.val_fraction to hold out part of ",
                     QuoteName(train_dir)));
  }
  if (spec.train_limit() > 0 &&
      spec.train_limit() < static_cast<int64_t>(train.size())) {
    train.resize(spec.train_limit());
  }
  DataSplits splits;
  splits.train.reset(new ImageFolderDataset(std::move(train), f, true));
  splits.test.reset(new ImageFolderDataset(std::move(val), f, false));
  return splits;
}

ImageFolderDataset::ImageFolderDataset(std::vector<ImageFile> files,
                                       const ImageFolderSpec& spec, bool train)
    : files_(std::move(files)),
      shape_({spec.grayscale() ? 1 : 3, spec.image_size(), spec.image_size()}),
      classes_(spec.classes()),
      size_(spec.image_size()),
      resize_(spec.resize()),
      train_(train),
      flip_(train && !spec.no_flip()),
      crop_{spec.scale_min(), spec.scale_max(), spec.ratio_min(),
            spec.ratio_max()},
      norm_(MakeNormalization(spec.mean().data(), spec.std().data(),
                              static_cast<int>(shape_[0]))) {}

Sampling ImageFolderDataset::Plan(int width, int height, uint64_t draw) const {
  if (!train_) return CenterSampling(width, height, resize_, size_);
  SplitMix64 rng(draw);
  Sampling s =
      CropSampling(RandomResizedCropBox(width, height, crop_, rng), size_);
  // Its own stream: the crop takes a varying number of draws.
  s.flip = flip_ && (SplitMix64Mix(draw ^ 0x666c6970) >> 63) != 0;
  return s;
}

absl::Status ImageFolderDataset::Read(int64_t index, uint64_t draw,
                                      SampleOut& out) const {
  const ImageFile& file = files_[index];
  ASSIGN_OR_RETURN(const std::string bytes, ReadImageFile(file.path));
  Sampling sampling;
  DecodeRequest request;
  request.channels = static_cast<int>(shape_[0]);
  request.plan = [&](int width, int height) {
    sampling = Plan(width, height, draw);
    return RegionFor(sampling, size_, width, height);
  };
  ASSIGN_OR_RETURN(const DecodedImage image,
                   DecodeImage(bytes, file.path, request));
  SampleImage(image, sampling, size_, norm_, out.features);
  out.label = file.label;
  return absl::OkStatus();
}

}  // namespace cohort

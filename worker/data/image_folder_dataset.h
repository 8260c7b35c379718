// Images in class folders (DatasetSpec kind IMAGE_FOLDER), torchvision's
// ImageFolder layout:
//   DIR/train/CLASS/*.{jpg,jpeg,png}   (extensions in any case)
//   DIR/val/CLASS/...                  (or val_fraction of train held out)
// Classes are train's subfolders in sorted order (class index = position);
// val's class folders must be a subset of them and keep train's indices.
// Opening builds only the index (paths and labels, sorted); a sample is
// read from its file and decoded when it is read, so memory holds no image
// beyond the ones the loader threads are decoding.
//
// Ownership: owns its index. Thread safety: immutable after construction;
// Read() is reentrant, every loader thread calls it concurrently.
#ifndef COHORT_WORKER_DATA_IMAGE_FOLDER_DATASET_H_
#define COHORT_WORKER_DATA_IMAGE_FOLDER_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "worker/data/dataset.h"
#include "worker/data/image_transform.h"

namespace cohort {

// Both splits of `spec` (kind IMAGE_FOLDER) under `dir`. Errors name the
// folder at fault: NotFound (a missing train folder, or a missing val
// folder without val_fraction), PermissionDenied (a folder that cannot be
// listed), InvalidArgument (no class folders, a class count other than
// image_folder.classes, an empty class folder, a val class unknown to
// train).
absl::StatusOr<DataSplits> LoadImageFolder(const DatasetSpec& spec,
                                           const std::string& dir);

struct ImageFile {
  std::string path;
  int32_t label = 0;
};

class ImageFolderDataset : public Dataset {
 public:
  // `spec` with its defaults filled (FillImageFolderDefaults); `train`
  // chooses the random crop and flip, else the resize and center crop.
  ImageFolderDataset(std::vector<ImageFile> files, const ImageFolderSpec& spec,
                     bool train);

  int64_t size() const override { return files_.size(); }
  const Shape& sample_shape() const override { return shape_; }
  int num_classes() const override { return classes_; }
  // DataLoss naming the file when it cannot be read or decoded.
  absl::Status Read(int64_t index, uint64_t draw,
                    SampleOut& out) const override;

  const std::vector<ImageFile>& files() const { return files_; }

 private:
  // Where output pixels come from, for an image of width x height.
  Sampling Plan(int width, int height, uint64_t draw) const;

  const std::vector<ImageFile> files_;
  const Shape shape_;
  const int classes_;
  const int size_;
  const int resize_;
  const bool train_;
  const bool flip_;
  const CropParams crop_;
  const Normalization norm_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_IMAGE_FOLDER_DATASET_H_

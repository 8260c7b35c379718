// Test and benchmark helper: JPEG and PNG files written with libjpeg-turbo
// and libpng, and image folders (data kind IMAGE_FOLDER) of synthetic,
// learnable images or of CIFAR-10 records. Generated files are never
// committed: tests and benchmarks write them into their temp directories.
//
// Plain functions; reentrant.
#ifndef COHORT_TESTS_IMAGE_FILES_H_
#define COHORT_TESTS_IMAGE_FILES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace cohort {

// Interleaved 8-bit pixels.
struct Pixels {
  int width = 0, height = 0, channels = 3;  // 1 (gray) or 3 (RGB)
  std::vector<uint8_t> data;
  uint8_t& at(int x, int y, int c) {
    return data[(static_cast<size_t>(y) * width + x) * channels + c];
  }
};

struct JpegOptions {
  int quality = 90;
  bool progressive = false;
  // Store as CMYK with an Adobe marker (inverted values, as Photoshop
  // writes them), or as YCCK, instead of YCbCr (RGB input only).
  bool cmyk = false;
  bool ycck = false;
};
std::string EncodeJpeg(const Pixels& image, const JpegOptions& options = {});

struct PngOptions {
  bool alpha = false;    // add an alpha channel (gray + alpha, RGBA)
  bool sixteen = false;  // 16-bit samples (v * 257)
  bool palette = false;  // an indexed image (RGB input of <= 256 colors)
  bool interlaced = false;
};
std::string EncodePng(const Pixels& image, const PngOptions& options = {});

// A w x h image of class `label` (of 10 looks: a color and a stripe
// direction), varied by `seed` (shade, stripe phase, noise).
Pixels SyntheticImage(int label, uint64_t seed, int width, int height,
                      int channels = 3);

struct FolderOptions {
  int classes = 4;
  int train_per_class = 50;
  int val_per_class = 10;  // 0: no val folder
  int width = 40, height = 32;
  // "jpg", "png" or "mixed" (every third file a PNG).
  std::string format = "mixed";
  int quality = 90;
  uint64_t seed = 1;
};

// Writes DIR/train/class_K/NNNNN.jpg|png (and DIR/val/...) and returns the
// number of files written.
int64_t WriteImageFolder(const std::string& dir, const FolderOptions& options);

// Writes CIFAR-10 binary records (3073 bytes each) from `batch` as an image
// folder under DIR/SPLIT/<class name>/, at most `limit` records (0: all);
// returns how many. Empty when the file cannot be read.
int64_t WriteCifarFolder(const std::string& batch, const std::string& dir,
                         const std::string& split, int64_t limit,
                         const std::string& format, int upscale_width = 0,
                         int upscale_height = 0);

// Writes `bytes` to `path`; false on error.
bool WriteBytes(const std::string& path, const std::string& bytes);

}  // namespace cohort

#endif  // COHORT_TESTS_IMAGE_FILES_H_

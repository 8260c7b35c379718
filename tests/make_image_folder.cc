// make_image_folder: writes image folders (data kind IMAGE_FOLDER) for tests
// and benchmarks, and single odd or damaged image files.
//
//   make_image_folder --out=DIR [--classes=4 --train=50 --val=10
//       --width=40 --height=32 --format=jpg|png|mixed --quality=90 --seed=1]
//     synthetic, learnable images: DIR/train/class_KK/NNNNN.jpg|png, DIR/val/
//   make_image_folder --out=DIR --cifar_dir=D [--cifar_limit=N
//       --width=W --height=H --format=...]
//     CIFAR-10 binary records (data_batch_1.bin to train/, test_batch.bin to
//     val/), upscaled to W x H when given
//   make_image_folder --file=PATH --kind=KIND
//     one file: corrupt (a JPEG whose frame header says 0 rows), truncated
//     (a JPEG cut in half), gif (a GIF, whatever PATH's name), cmyk and ycck
//     (Adobe CMYK / YCCK JPEGs, valid), 12bit (a JPEG claiming 12-bit
//     samples), png16 / palette / interlaced / gray_alpha (valid PNGs),
//     truncated_png, empty (0 bytes)
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "tests/image_files.h"

ABSL_FLAG(std::string, out, "", "folder to write");
ABSL_FLAG(std::string, cifar_dir, "", "folder of CIFAR-10 .bin batches");
ABSL_FLAG(int64_t, cifar_limit, 0, "records per split (0: all)");
ABSL_FLAG(int, classes, 4, "synthetic classes (at most 10 looks)");
ABSL_FLAG(int, train, 50, "training images per class");
ABSL_FLAG(int, val, 10, "validation images per class (0: no val folder)");
ABSL_FLAG(int, width, 40, "image width (CIFAR: upscale to it when set)");
ABSL_FLAG(int, height, 32, "image height");
ABSL_FLAG(std::string, format, "mixed", "jpg, png or mixed");
ABSL_FLAG(int, quality, 90, "JPEG quality");
ABSL_FLAG(uint64_t, seed, 1, "varies the synthetic images");
ABSL_FLAG(std::string, file, "", "write one file of --kind here");
ABSL_FLAG(std::string, kind, "", "the kind of file for --file");

namespace cohort {
namespace {

std::string Jpeg(const JpegOptions& o = {}) {
  return EncodeJpeg(SyntheticImage(1, 7, 48, 40), o);
}

// The file of `kind`, or empty for an unknown kind.
std::string OddFile(const std::string& kind) {
  if (kind == "corrupt") {
    std::string j = Jpeg();
    const size_t sof = j.find("\xff\xc0");
    if (sof == std::string::npos) return "";
    j[sof + 5] = j[sof + 6] = 0;  // the frame's height: 0 rows
    return j;
  }
  if (kind == "truncated") {
    const std::string j = Jpeg();
    return j.substr(0, j.size() / 2);
  }
  if (kind == "gif")
    return std::string("GIF89a\x10\x00\x10\x00\x80\x00\x00", 13);
  if (kind == "cmyk" || kind == "ycck") {
    JpegOptions o;
    o.cmyk = kind == "cmyk";
    o.ycck = kind == "ycck";
    return Jpeg(o);
  }
  if (kind == "12bit") {
    std::string j = Jpeg();
    const size_t sof = j.find("\xff\xc0");
    if (sof == std::string::npos) return "";
    j[sof + 4] = 12;  // the frame's sample precision
    return j;
  }
  const Pixels p = SyntheticImage(2, 9, 48, 40);
  PngOptions o;
  if (kind == "png16") o.sixteen = true;
  if (kind == "palette") o.palette = true;
  if (kind == "interlaced") o.interlaced = true;
  if (kind == "gray_alpha") o.alpha = true;
  if (kind == "png16" || kind == "palette" || kind == "interlaced") {
    return EncodePng(p, o);
  }
  if (kind == "gray_alpha")
    return EncodePng(SyntheticImage(2, 9, 48, 40, 1), o);
  if (kind == "truncated_png") {
    const std::string png = EncodePng(p);
    return png.substr(0, png.size() * 2 / 3);
  }
  return "";
}

int Main() {
  const std::string file = absl::GetFlag(FLAGS_file);
  if (!file.empty()) {
    const std::string kind = absl::GetFlag(FLAGS_kind);
    const std::string bytes = OddFile(kind);
    if (bytes.empty() && kind != "empty") {
      std::fprintf(stderr, "make_image_folder: unknown --kind=%s\n",
                   kind.c_str());
      return 2;
    }
    return WriteBytes(file, bytes) ? 0 : 1;
  }
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    std::fprintf(stderr, "make_image_folder: --out or --file is required\n");
    return 2;
  }
  const std::string cifar = absl::GetFlag(FLAGS_cifar_dir);
  if (!cifar.empty()) {
    const bool upscale =
        absl::GetFlag(FLAGS_width) != 40 || absl::GetFlag(FLAGS_height) != 32;
    const int w = upscale ? absl::GetFlag(FLAGS_width) : 0;
    const int h = upscale ? absl::GetFlag(FLAGS_height) : 0;
    const int64_t limit = absl::GetFlag(FLAGS_cifar_limit);
    const std::string format = absl::GetFlag(FLAGS_format);
    const int64_t train = WriteCifarFolder(cifar + "/data_batch_1.bin", out,
                                           "train", limit, format, w, h);
    const int64_t val = WriteCifarFolder(cifar + "/test_batch.bin", out, "val",
                                         limit, format, w, h);
    if (train == 0) {
      std::fprintf(stderr, "make_image_folder: no records in %s\n",
                   cifar.c_str());
      return 1;
    }
    std::printf("%lld training and %lld validation images in %s\n",
                static_cast<long long>(train), static_cast<long long>(val),
                out.c_str());
    return 0;
  }
  FolderOptions o;
  o.classes = absl::GetFlag(FLAGS_classes);
  o.train_per_class = absl::GetFlag(FLAGS_train);
  o.val_per_class = absl::GetFlag(FLAGS_val);
  o.width = absl::GetFlag(FLAGS_width);
  o.height = absl::GetFlag(FLAGS_height);
  o.format = absl::GetFlag(FLAGS_format);
  o.quality = absl::GetFlag(FLAGS_quality);
  o.seed = absl::GetFlag(FLAGS_seed);
  const int64_t n = WriteImageFolder(out, o);
  std::printf("%lld images in %s\n", static_cast<long long>(n), out.c_str());
  return 0;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return cohort::Main();
}

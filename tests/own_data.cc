#include "tests/own_data.h"

#include <filesystem>
#include <fstream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "tests/image_files.h"

namespace cohort {
namespace {

// A sample's 20 features and its class, the same for every format below.
float Feature(int64_t i, int j) {
  return static_cast<float>(((i * 31 + j * 7) % 23) - 11) / 8.0f +
         (j == i % 10 ? 2.0f : 0.0f);
}

void WriteNpy(const std::string& path, const std::string& descr,
              const std::string& shape, const std::string& data) {
  std::string dict = "{'descr': '" + descr +
                     "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  f.put(static_cast<char>(dict.size() & 0xff));
  f.put(static_cast<char>(dict.size() >> 8));
  f << dict << data;
}

}  // namespace

void WriteNpySplit(const std::string& dir, const std::string& name,
                   int64_t first, int64_t n) {
  std::string x, y;
  for (int64_t i = first; i < first + n; ++i) {
    for (int j = 0; j < 20; ++j) {
      const float v = Feature(i, j);
      x.append(reinterpret_cast<const char*>(&v), sizeof(v));
    }
    const int64_t label = i % 10;
    y.append(reinterpret_cast<const char*>(&label), sizeof(label));
  }
  WriteNpy(dir + "/" + name + "_x.npy", "<f4", absl::StrCat("(", n, ", 20)"),
           x);
  WriteNpy(dir + "/" + name + "_y.npy", "<i8", absl::StrCat("(", n, ",)"), y);
}

void WriteCsv(const std::string& path, int64_t first, int64_t n) {
  std::ofstream f(path);
  for (int j = 0; j < 20; ++j) f << "f" << j << ",";
  f << "label\n";
  for (int64_t i = first; i < first + n; ++i) {
    for (int j = 0; j < 20; ++j) f << Feature(i, j) << ",";
    f << i % 10 << "\n";
  }
}

std::string NumpyRegressionBlock(const std::string& dir) {
  std::filesystem::create_directories(dir);
  for (const auto& [name, first, n] :
       {std::tuple<const char*, int64_t, int64_t>{"train", 0, 512},
        {"test", 512, 64}}) {
    WriteNpySplit(dir, name, first, n);  // x as above; y replaced below
    std::string y;
    for (int64_t i = first; i < first + n; ++i) {
      for (int j = 0; j < 10; ++j) {
        const float v = 0.5f * Feature(i, j + 10) + 0.25f * Feature(i, j);
        y.append(reinterpret_cast<const char*>(&v), sizeof(v));
      }
    }
    WriteNpy(absl::StrCat(dir, "/", name, "_y.npy"), "<f4",
             absl::StrCat("(", n, ", 10)"), y);
  }
  return absl::StrCat("data { kind: NUMPY dir: \"", dir,
                      "\" numpy { shape: 20 target_shape: 10 "
                      "train_x: \"train_x.npy\" train_y: \"train_y.npy\" "
                      "test_x: \"test_x.npy\" test_y: \"test_y.npy\" } }\n");
}

std::string NumpyDataBlock(const std::string& dir) {
  std::filesystem::create_directories(dir);
  WriteNpySplit(dir, "train0", 0, 300);
  WriteNpySplit(dir, "train1", 300, 212);
  WriteNpySplit(dir, "test", 512, 64);
  return absl::StrCat("data { kind: NUMPY dir: \"", dir,
                      "\" numpy { shape: 20 classes: 10 "
                      "train_x: \"train0_x.npy\" train_x: \"train1_x.npy\" "
                      "train_y: \"train0_y.npy\" train_y: \"train1_y.npy\" "
                      "test_x: \"test_x.npy\" test_y: \"test_y.npy\" } }\n");
}

std::string ImageFolderDataBlock(const std::string& dir) {
  FolderOptions o;
  o.classes = 10;
  o.train_per_class = 52;
  o.val_per_class = 6;
  o.width = 12;
  o.height = 10;
  WriteImageFolder(dir, o);
  return absl::StrCat("data { kind: IMAGE_FOLDER dir: \"", dir,
                      "\" image_folder { classes: 10 image_size: 8 } }\n");
}

}  // namespace cohort

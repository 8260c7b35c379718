// Images per second of cohort's image folder pipeline (kind IMAGE_FOLDER):
// read the file, decode the JPEG, RandomResizedCrop(224), flip, normalise,
// batch, through the real Loader with T background threads.
//   imagefolder DIR CLASSES THREADS [EPOCHS]
// prints "cohort threads T images_per_s X" (median of EPOCHS passes over
// the training folder, after one warm-up pass; bench/imagefolder.py runs it
// beside torchvision). The run checks itself: every batch is complete,
// without read errors, with finite features and labels in range, or it
// exits 1 instead of printing a number.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "proto/job.pb.h"
#include "worker/data/dataset.h"
#include "worker/data/loader.h"
#include "worker/data/splitmix.h"

namespace cohort {
namespace {

constexpr int64_t kBatch = 64;

// One pass over `set` in a shuffled order; false on a bad batch.
bool Pass(const Dataset& set, int threads, uint64_t seed, double* seconds) {
  std::vector<int64_t> order(set.size());
  for (int64_t i = 0; i < set.size(); ++i) order[i] = i;
  SplitMix64 rng(seed);
  for (int64_t i = set.size() - 1; i > 0; --i) {
    std::swap(order[i], order[rng.Next() % (i + 1)]);
  }
  ReadOptions read;
  read.draw_seed = seed;
  const auto start = std::chrono::steady_clock::now();
  Loader loader(&set, order, kBatch, /*drop_last=*/false,
                BatchLayout::kBatchOuter, threads, /*prefetch=*/2, read);
  Batch batch;
  int64_t seen = 0;
  while (loader.Next(&batch)) {
    if (!batch.error.ok()) {
      std::fprintf(stderr, "imagefolder: %s\n", batch.error.ToString().c_str());
      return false;
    }
    const float* f = batch.features.data();
    for (int64_t i = 0; i < batch.features.size(); i += 4097) {
      if (!std::isfinite(f[i])) return false;
    }
    for (int32_t label : batch.labels) {
      if (label < 0 || label >= set.num_classes()) return false;
    }
    seen += batch.size();
  }
  *seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return seen == set.size();
}

int Main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s DIR CLASSES THREADS [EPOCHS]\n", argv[0]);
    return 2;
  }
  DatasetSpec spec;
  spec.set_kind(DatasetSpec::IMAGE_FOLDER);
  spec.set_dir(argv[1]);
  spec.mutable_image_folder()->set_classes(std::atoi(argv[2]));
  const int threads = std::atoi(argv[3]);
  const int epochs = argc > 4 ? std::atoi(argv[4]) : 3;
  absl::StatusOr<DataSplits> splits = LoadDataset(spec, "", 1);
  if (!splits.ok()) {
    std::fprintf(stderr, "imagefolder: %s\n",
                 splits.status().ToString().c_str());
    return 1;
  }
  const Dataset& set = *splits->train;
  std::vector<double> rates;
  for (int e = 0; e <= epochs; ++e) {
    double seconds = 0;
    if (!Pass(set, threads, 1000 + e, &seconds)) {
      std::fprintf(stderr, "imagefolder: a bad batch in pass %d\n", e);
      return 1;
    }
    if (e > 0) rates.push_back(set.size() / seconds);  // pass 0 warms up
  }
  std::sort(rates.begin(), rates.end());
  std::printf("cohort threads %d images_per_s %.1f\n", threads,
              rates[rates.size() / 2]);
  return 0;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) { return cohort::Main(argc, argv); }

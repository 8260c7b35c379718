// What gradient compression costs a worker's CPU per step, apart from the
// network: each codec (worker/comm/half_codec.h, powersgd_codec.h) encodes,
// sums and decodes a zoo model's gradient on a world of one rank, whose
// all-reduces are the identity, over the buckets a job would cut. Prints
// milliseconds per step, the floats or halves handed to the all-reduces
// and their ratio to the uncompressed gradient, and checks its own output:
// FP16 and BF16 must hand over half the bytes and give back the gradient
// within their rounding; POWERSGD must hand over fewer bytes than the
// gradient and keep error + result equal to the input.
//
//   compression_codec [MODEL [RANK [STEPS [BUCKET_MB]]]]
//   (defaults: resnet18_cifar 4 10 25)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/zoo_specs.h"
#include "proto/job.pb.h"
#include "worker/comm/buckets.h"
#include "worker/comm/half_codec.h"
#include "worker/comm/one_rank_communicator.h"
#include "worker/comm/powersgd_codec.h"
#include "worker/compute_threads.h"
#include "worker/zoo.h"

namespace cohort {
namespace {

struct Gradient {
  std::vector<FlatTensor> tensors;
  std::vector<int64_t> offsets;
  int64_t count = 0;
};

// The buckets a BucketReducer cuts: from the back, tensor by tensor.
std::vector<GradientBucket> Buckets(const Gradient& g, int64_t bucket_bytes) {
  return *PlanParameterBuckets(g.offsets, g.count,
                               bucket_bytes / int64_t{sizeof(float)});
}

struct Result {
  double ms = 0;
  int64_t bytes = 0;
  double worst = 0;  // the check's largest violation (0: none)
};

// Gradient-like values: many small, a few large, fixed seed.
void Fill(std::vector<float>& v, uint32_t seed) {
  for (size_t i = 0; i < v.size(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    const float u = static_cast<float>(seed >> 8) / 16777216.0f - 0.5f;
    v[i] = u * (i % 97 == 0 ? 4e-1f : 1e-3f);
  }
}

Result Time(BucketCodec& codec, const Gradient& g, int64_t bucket_bytes,
            int steps, bool powersgd) {
  OneRankCommunicator comm;
  std::vector<float> flat(g.count), input(g.count);
  const std::vector<GradientBucket> buckets = Buckets(g, bucket_bytes);
  for (size_t i = 0; i < buckets.size(); ++i) {
    (void)codec.Bind(&comm, static_cast<int>(i), flat.data() + buckets[i].begin,
                     buckets[i].begin, buckets[i].size(), 0);
  }
  Result r;
  std::vector<float> error_before(g.count, 0.0f);
  for (int step = 0; step < steps + 1; ++step) {
    Fill(input, 7 + step);
    std::copy(input.begin(), input.end(), flat.begin());
    codec.BeginStep(step);
    const auto start = std::chrono::steady_clock::now();
    int64_t bytes = 0;
    for (size_t i = 0; i < buckets.size(); ++i) {
      bytes += *codec.Reduce(static_cast<int>(i), 1.0f);
    }
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count();
    if (step > 0) r.ms += ms / steps;  // the first binds and allocates
    r.bytes = bytes;
    if (powersgd) {
      // input + error before = result + error after, element by element.
      const absl::Span<float> error =
          static_cast<PowerSgdCodec&>(codec).error();
      for (int64_t i = 0; i < g.count; ++i) {
        const double d = input[i] + error_before[i] - flat[i] - error[i];
        r.worst = std::max(r.worst, std::fabs(d) / 4e-1);
      }
      error_before.assign(error.begin(), error.end());
    } else {
      // Relative to the value, or to the smallest normal half below it
      // (FP16 keeps tiny gradients as subnormals or zero).
      for (int64_t i = 0; i < g.count; ++i) {
        const double rel = std::fabs(flat[i] - input[i]) /
                           std::max(6.104e-5f, std::fabs(input[i]));
        r.worst = std::max(r.worst, rel);
      }
    }
  }
  return r;
}

int Main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "resnet18_cifar";
  const int rank = argc > 2 ? std::atoi(argv[2]) : 4;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 10;
  const int64_t bucket_bytes =
      (argc > 4 ? std::atoll(argv[4]) : 25) * (int64_t{1} << 20);
  SetComputeThreads(1);  // as a worker with one compute thread
  ModelSpec spec;
  spec.set_zoo(model);
  absl::StatusOr<Shape> shape = ZooInputShape(model);
  if (!shape.ok() || rank < 1 || steps < 1 || bucket_bytes <= 0) {
    std::fprintf(stderr, "usage: %s [MODEL [RANK [STEPS [BUCKET_MB]]]]\n",
                 argv[0]);
    return 2;
  }
  auto built = BuildModel<float>(spec, *shape, 1);
  if (!built.ok()) {
    std::fprintf(stderr, "%s\n", std::string(built.status().message()).c_str());
    return 2;
  }
  Gradient g;
  g.count = (*built)->grads().size();
  for (const auto& e : (*built)->param_store().entries()) {
    g.offsets.push_back(e.offset);
    g.tensors.push_back(
        {e.offset, NumElements(e.shape), e.shape.empty() ? 1 : e.shape[0]});
  }
  std::printf(
      "%s: %lld gradient floats (%.1f MB), %zu buckets of <= %lld "
      "MiB, 1 thread, mean of %d steps\n\n",
      model.c_str(), static_cast<long long>(g.count), g.count * 4e-6,
      Buckets(g, bucket_bytes).size(),
      static_cast<long long>(bucket_bytes >> 20), steps);
  std::printf(
      "| kind | ms per step | bytes to all-reduce | / float gradient |\n"
      "|---|---|---|---|\n");
  bool ok = true;
  auto report = [&](const char* name, BucketCodec& codec, bool powersgd,
                    double max_bytes_ratio, double tolerance) {
    const Result r = Time(codec, g, bucket_bytes, steps, powersgd);
    const double ratio = r.bytes / (4.0 * g.count);
    std::printf("| %s | %.3f | %lld | %.4f |\n", name, r.ms,
                static_cast<long long>(r.bytes), ratio);
    if (ratio > max_bytes_ratio || r.worst > tolerance) {
      std::printf(
          "  FAILED: ratio %.4f (at most %.4f), error %.3g (at most "
          "%.3g)\n",
          ratio, max_bytes_ratio, r.worst, tolerance);
      ok = false;
    }
  };
  HalfCodec fp16(HalfFormat::kFp16), bf16(HalfFormat::kBf16);
  report("FP16", fp16, false, 0.5, 1.0 / 1024);
  report("BF16", bf16, false, 0.5, 1.0 / 128);
  PowerSgdOptions o;
  o.rank = rank;
  o.warmup_steps = 0;
  PowerSgdCodec power(o, g.tensors, g.count);
  const std::string name = "POWERSGD rank " + std::to_string(rank);
  report(name.c_str(), power, true, 0.5, 1e-5);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) { return cohort::Main(argc, argv); }

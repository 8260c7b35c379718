// Runs gradients through cohort's compressed buckets (PowerSgdCodec,
// HalfCodec) on a one-rank world, whose all-reduce is the identity, and
// writes what each step leaves in the buffer, for
// tests/compression_torch_test (which compares it with PyTorch's DDP
// communication hooks).
//
//   compression_dump --kind=powersgd|fp16|bf16 [--rank=R] [--warmup=W]
//       [--min-rate=X] [--steps=S] [--bucket-elems=N] DIR
//
// DIR holds shapes.txt (one tensor a line, its dimensions separated by
// spaces, in flat-buffer order, packed without padding; blank lines are
// skipped), grads.f32 (steps x total float32, little endian) and, for
// powersgd, optionally q0.f32 (every bucket's first Q in the codec's layout,
// bucket order: see PowerSgdCodec::SetQs). Buckets are cut as a
// BucketReducer with one boundary per tensor cuts them: from the back,
// closed once they hold N elements (N = 0, the default: one bucket). Per
// step the dump writes the buffer and, for powersgd, the codec's error to
// DIR/out.f32. Bad input: one line naming the file or flag, exit 2.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "worker/comm/buckets.h"
#include "worker/comm/communicator.h"
#include "worker/comm/half_codec.h"
#include "worker/comm/one_rank_communicator.h"
#include "worker/comm/powersgd_codec.h"

namespace cohort {
namespace {

constexpr int64_t kMaxInputBytes = int64_t{1} << 30;
// What grads.f32 could hold for one step.
constexpr int64_t kMaxTensorElements = kMaxInputBytes / sizeof(float);

struct Flags {
  std::string kind;
  PowerSgdOptions powersgd;
  int64_t steps = 0;  // 0: as many as grads.f32 holds
  int64_t bucket_elems = 0;
  std::string dir;
};

absl::Status BadFlag(absl::string_view arg, absl::string_view want) {
  return absl::InvalidArgumentError(
      absl::StrCat("flag ", arg, ": expected ", want));
}

// Sets the field `arg` names ("--name=value").
absl::Status ParseFlag(absl::string_view arg, Flags& flags) {
  const size_t eq = arg.find('=');
  const absl::string_view name = arg.substr(0, eq);
  const absl::string_view value =
      eq == absl::string_view::npos ? "" : arg.substr(eq + 1);
  PowerSgdOptions& p = flags.powersgd;
  if (name == "--kind") {
    if (value != "powersgd" && value != "fp16" && value != "bf16") {
      return BadFlag(arg, "powersgd, fp16 or bf16");
    }
    flags.kind = std::string(value);
  } else if (name == "--rank") {
    if (!absl::SimpleAtoi(value, &p.rank) || p.rank < 1) {
      return BadFlag(arg, "a rank of at least 1");
    }
  } else if (name == "--warmup") {
    if (!absl::SimpleAtoi(value, &p.warmup_steps) || p.warmup_steps < 0) {
      return BadFlag(arg, "a number of steps, 0 or more");
    }
  } else if (name == "--min-rate") {
    if (!absl::SimpleAtod(value, &p.min_compression_rate) ||
        !(p.min_compression_rate > 0)) {
      return BadFlag(arg, "a positive compression rate");
    }
  } else if (name == "--steps") {
    if (!absl::SimpleAtoi(value, &flags.steps) || flags.steps < 1) {
      return BadFlag(arg, "a number of steps, 1 or more");
    }
  } else if (name == "--bucket-elems") {
    if (!absl::SimpleAtoi(value, &flags.bucket_elems) ||
        flags.bucket_elems < 0) {
      return BadFlag(arg, "a number of elements, 0 or more");
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg));
  }
  return absl::OkStatus();
}

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (absl::StartsWith(arg, "--")) {
      RETURN_IF_ERROR(ParseFlag(arg, flags));
    } else if (flags.dir.empty()) {
      flags.dir = std::string(arg);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("a second directory ", arg, " (after ", flags.dir, ")"));
    }
  }
  if (flags.kind.empty()) {
    return absl::InvalidArgumentError("--kind=powersgd|fp16|bf16 is required");
  }
  if (flags.dir.empty()) {
    return absl::InvalidArgumentError("no input directory given");
  }
  return flags;
}

// The tensors of DIR/shapes.txt in flat-buffer order.
absl::StatusOr<std::vector<FlatTensor>> ReadShapes(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text,
                   ReadRegularFile(path, kMaxInputBytes, "tensor shapes"));
  std::vector<FlatTensor> tensors;
  int64_t offset = 0, line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    FlatTensor t;
    t.offset = offset;
    t.numel = 1;
    for (absl::string_view word :
         absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty())) {
      int64_t dim;
      if (!absl::SimpleAtoi(word, &dim) || dim < 1 ||
          dim > kMaxTensorElements) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line_number, ": '", word,
                         "' is not a dimension (a positive integer)"));
      }
      if (t.rows == 0) t.rows = dim;
      t.numel *= dim;
      if (t.numel > kMaxTensorElements) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line_number, ": a tensor of over ",
                         kMaxTensorElements, " elements"));
      }
    }
    if (t.rows == 0) continue;  // a blank line
    offset += t.numel;
    tensors.push_back(t);
  }
  if (tensors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no tensors"));
  }
  return tensors;
}

absl::StatusOr<std::vector<float>> ReadFloats(const std::string& path,
                                              absl::string_view what) {
  ASSIGN_OR_RETURN(const std::string bytes,
                   ReadRegularFile(path, kMaxInputBytes, what));
  if (bytes.size() % sizeof(float) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", bytes.size(),
                     " bytes, not a whole number of float32 values"));
  }
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

// The buckets a BucketReducer with a boundary at every tensor makes.
absl::StatusOr<std::vector<GradientBucket>> PlanDumpBuckets(
    const std::vector<FlatTensor>& tensors, int64_t total,
    int64_t bucket_elems) {
  if (bucket_elems == 0) return std::vector<GradientBucket>{{0, total}};
  std::vector<int64_t> starts;
  for (const FlatTensor& t : tensors) starts.push_back(t.offset);
  return PlanParameterBuckets(starts, total, bucket_elems);
}

// How many steps grads.f32 holds, checked against --steps.
absl::StatusOr<int64_t> CountSteps(const Flags& flags, const std::string& path,
                                   int64_t values, int64_t total) {
  if (values == 0 || values % total != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", values, " values, not a whole number of ",
                     "steps of ", total, " (the tensors of shapes.txt)"));
  }
  const int64_t steps = values / total;
  if (flags.steps != 0 && flags.steps != steps) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", steps, " steps of ", total,
                     " values, but --steps=", flags.steps));
  }
  return steps;
}

// Binds every bucket, then warm-starts PowerSGD from DIR/q0.f32 if present.
absl::Status BindAll(const Flags& flags, Communicator& comm,
                     const std::vector<GradientBucket>& buckets,
                     BucketCodec& codec, PowerSgdCodec* powersgd,
                     std::vector<float>& flat) {
  for (size_t i = 0; i < buckets.size(); ++i) {
    RETURN_IF_ERROR(codec.Bind(&comm, static_cast<int>(i),
                               flat.data() + buckets[i].begin, buckets[i].begin,
                               buckets[i].size(), 0));
  }
  if (powersgd == nullptr) return absl::OkStatus();
  const std::string q0_path = flags.dir + "/q0.f32";
  absl::StatusOr<std::vector<float>> q0 =
      ReadFloats(q0_path, "initial PowerSGD factors");
  if (absl::IsNotFound(q0.status())) return absl::OkStatus();  // seeded Q
  RETURN_IF_ERROR(q0.status());
  const absl::Status set = powersgd->SetQs(*q0);
  if (!set.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(q0_path, ": ", set.message()));
  }
  return absl::OkStatus();
}

absl::Status Run(const Flags& flags) {
  const std::string grads_path = flags.dir + "/grads.f32";
  ASSIGN_OR_RETURN(const std::vector<FlatTensor> tensors,
                   ReadShapes(flags.dir + "/shapes.txt"));
  const int64_t total = tensors.back().offset + tensors.back().numel;
  ASSIGN_OR_RETURN(const std::vector<float> grads,
                   ReadFloats(grads_path, "gradients"));
  ASSIGN_OR_RETURN(const int64_t steps,
                   CountSteps(flags, grads_path, grads.size(), total));
  ASSIGN_OR_RETURN(const std::vector<GradientBucket> buckets,
                   PlanDumpBuckets(tensors, total, flags.bucket_elems));
  std::unique_ptr<BucketCodec> codec;
  PowerSgdCodec* powersgd = nullptr;
  if (flags.kind == "powersgd") {
    auto owned =
        std::make_unique<PowerSgdCodec>(flags.powersgd, tensors, total);
    powersgd = owned.get();
    codec = std::move(owned);
  } else {
    codec = std::make_unique<HalfCodec>(
        flags.kind == "fp16" ? HalfFormat::kFp16 : HalfFormat::kBf16);
  }
  OneRankCommunicator comm;
  std::vector<float> flat(total);
  RETURN_IF_ERROR(BindAll(flags, comm, buckets, *codec, powersgd, flat));
  std::vector<float> out;
  for (int64_t step = 0; step < steps; ++step) {
    // Copied, not assigned: the codec holds pointers into `flat`.
    std::copy(grads.begin() + step * total, grads.begin() + (step + 1) * total,
              flat.begin());
    codec->BeginStep(step);
    for (size_t i = 0; i < buckets.size(); ++i) {
      RETURN_IF_ERROR(codec->Reduce(static_cast<int>(i), 1.0f).status());
    }
    out.insert(out.end(), flat.begin(), flat.end());
    if (powersgd != nullptr) {
      const absl::Span<const float> error = powersgd->error();
      out.insert(out.end(), error.begin(), error.end());
    }
  }
  return WriteFileAtomically(
      flags.dir + "/out.f32",
      absl::string_view(reinterpret_cast<const char*>(out.data()),
                        out.size() * sizeof(float)));
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  absl::StatusOr<cohort::Flags> flags = cohort::ParseFlags(argc, argv);
  absl::Status status =
      flags.ok() ? cohort::Run(*flags) : std::move(flags).status();
  if (!status.ok()) {
    std::fprintf(stderr, "compression_dump: %s\n",
                 std::string(status.message()).c_str());
    return 2;
  }
  return 0;
}

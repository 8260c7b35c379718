// Writes the binary seed inputs of a fuzz target into a directory:
//   make_seeds TARGET DIR
// TARGET is one of mnist, cifar10, checkpoint, request_checks, shard, npy,
// csv, image (the
// spec target's seeds are text, in fuzz/corpus/spec). The seeds are valid
// inputs in the format each fuzzer's header comment describes, so fuzzing
// starts from the readers' success paths. Exit status 2 on bad usage, 1 when
// a seed cannot be made or written.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checkpoint.h"
#include "common/safetensors.h"
#include "common/status_macros.h"
#include "fuzz/dataset_checks.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/shard_seeds.h"
#include "proto/coordinator.pb.h"
#include "proto/job.pb.h"
#include "tests/image_files.h"

namespace cohort {
namespace fuzz {
namespace {

using Seeds = std::map<std::string, std::string>;  // file name -> bytes

std::string BigEndian32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
          static_cast<char>(v >> 8), static_cast<char>(v)};
}

// An IDX file of `count` records of `record` bytes with the given header.
std::string Idx(uint32_t magic, const std::vector<uint32_t>& dims,
                size_t record) {
  std::string out = BigEndian32(magic);
  for (uint32_t d : dims) out += BigEndian32(d);
  for (size_t i = 0; i < dims[0] * record; ++i) {
    out.push_back(static_cast<char>(dims.size() == 1 ? i % 10 : i * 7 % 251));
  }
  return out;
}

std::string MnistFiles(uint32_t train, uint32_t test) {
  return absl::StrJoin(
      {Idx(0x803, {train, 28, 28}, 784), Idx(0x801, {train}, 1),
       Idx(0x803, {test, 28, 28}, 784), Idx(0x801, {test}, 1)},
      kSplit);
}

Seeds Mnist() {
  const std::string files = MnistFiles(2, 1);
  std::vector<std::string> gzipped;
  for (absl::string_view part : SplitInput(files)) {
    gzipped.push_back(Gzip(part));
  }
  return {
      {"raw", std::string(1, '\0') + files},
      {"raw_normalized_limit", absl::StrCat("\x0c", files)},
      {"gz_compressed_by_fuzzer", absl::StrCat("\x03", files)},
      {"gz", absl::StrCat("\x01", absl::StrJoin(gzipped, kSplit))},
  };
}

std::string CifarRecords(int n, int first_label) {
  std::string out;
  for (int r = 0; r < n; ++r) {
    out.push_back(static_cast<char>((first_label + r) % 10));
    for (int i = 0; i < 3 * 32 * 32; ++i) {
      out.push_back(static_cast<char>((i * 13 + r) % 251));
    }
  }
  return out;
}

Seeds Cifar10() {
  const std::string files = absl::StrJoin(
      {CifarRecords(1, 0), CifarRecords(1, 3), CifarRecords(1, 9)}, kSplit);
  return {
      {"two_train_files", absl::StrCat(std::string(1, '\0'), files)},
      {"archive_layout_normalized", absl::StrCat("\x05", files)},
  };
}

// A .npy file as NumPy 1.x writes it: version 1.0, header padded to 64.
std::string NpyFile(absl::string_view descr, absl::string_view shape,
                    absl::string_view data) {
  std::string dict =
      absl::StrCat("{'descr': '", descr,
                   "', 'fortran_order': False, 'shape': ", shape, ", }");
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return absl::StrCat(out, dict, data);
}

Seeds Npy() {
  return {
      {"float32_2x2", NpyFile("<f4", "(2, 2)", std::string(16, '\x3f'))},
      {"int64_labels", NpyFile("<i8", "(3,)", std::string(24, '\0'))},
      {"uint8_empty", NpyFile("|u1", "(0, 4)", "")},
  };
}

// Little-endian bytes of `v`.
std::string Le(uint64_t v, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i)
    out += static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

// A ZIP archive of stored members, as np.savez writes .npz files (without
// its ZIP64 extras, which the fuzzer may find on its own).
std::string StoredZip(
    const std::vector<std::pair<std::string, std::string>>& members) {
  std::string body, directory;
  for (const auto& [name, data] : members) {
    const uint64_t offset = body.size();
    const std::string common = absl::StrCat(
        Le(20, 2), Le(0, 2), Le(0, 2), Le(0, 4), Le(0, 4), Le(data.size(), 4),
        Le(data.size(), 4), Le(name.size(), 2), Le(0, 2));
    body += absl::StrCat(Le(0x04034b50, 4), common, name, data);
    directory +=
        absl::StrCat(Le(0x02014b50, 4), Le(20, 2), common, Le(0, 2), Le(0, 2),
                     Le(0, 2), Le(0, 4), Le(offset, 4), name);
  }
  return absl::StrCat(body, directory, Le(0x06054b50, 4), Le(0, 4),
                      Le(members.size(), 2), Le(members.size(), 2),
                      Le(directory.size(), 4), Le(body.size(), 4), Le(0, 2));
}

Seeds Npz() {
  const std::string x = NpyFile("<f4", "(2, 2)", std::string(16, '\x3f'));
  const std::string y = NpyFile("<i8", "(2,)", std::string(16, '\0'));
  return {
      {"x_and_y", StoredZip({{"x.npy", x}, {"y.npy", y}})},
      {"x_only", StoredZip({{"x.npy", x}})},
  };
}

Seeds Safetensors() {
  const std::string w(24, '\x3f');
  return {
      {"two_tensors",
       SafetensorsBytes(
           {{"0.weight", "F32", {2, 3}, w},
            {"1.num_batches_tracked", "I64", {}, std::string(8, '\0')}},
           {{"format", "pt"}})},
      {"half",
       SafetensorsBytes({{"x", "F16", {4}, std::string(8, '\x3c')}}, {})},
  };
}

Seeds Csv() {
  return {
      {"three_rows", "a,label,b\n1.5,0,2\n-3,2,1e3\n0,1,0\n"},
      {"crlf_blank_lines", "label, a ,b\r\n\r\n1,2,3\r\n"},
  };
}

// Small JPEGs and PNGs of every layout the image decoder reads.
Seeds Image() {
  const Pixels rgb = SyntheticImage(1, 3, 24, 17);
  const Pixels gray = SyntheticImage(2, 4, 17, 24, 1);
  Seeds seeds;
  seeds["baseline.jpg"] = EncodeJpeg(rgb);
  JpegOptions o;
  o.progressive = true;
  seeds["progressive.jpg"] = EncodeJpeg(rgb, o);
  seeds["gray.jpg"] = EncodeJpeg(gray);
  o = JpegOptions();
  o.cmyk = true;
  seeds["cmyk.jpg"] = EncodeJpeg(rgb, o);
  o.cmyk = false;
  o.ycck = true;
  seeds["ycck.jpg"] = EncodeJpeg(rgb, o);
  seeds["rgb.png"] = EncodePng(rgb);
  seeds["gray.png"] = EncodePng(gray);
  PngOptions p;
  p.alpha = true;
  seeds["rgba.png"] = EncodePng(rgb, p);
  p.sixteen = true;
  p.interlaced = true;
  seeds["rgba16_interlaced.png"] = EncodePng(rgb, p);
  p = PngOptions();
  p.palette = true;
  seeds["palette.png"] = EncodePng(gray, p);
  return seeds;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::StatusOr<Seeds> CheckpointSeeds() {
  Checkpoint c;
  c.step = 7;  // the name checkpoint_fuzzer gives the file
  c.epoch = 1;
  c.epoch_offset = 3;
  c.generation = 2;
  c.spec_hash = 0x1234abcd;
  c.metadata = {{"model", "lenet5"}, {"optimizer", "sgd"}};
  c.tensors.push_back({"conv1.weight", {2, 3}, {1, 2, 3, 4, 5, 6}});
  c.tensors.push_back({"step", {}, {42}});
  c.tensors.push_back({"empty", {0, 4}, {}});
  ScratchDir dir;
  RETURN_IF_ERROR(WriteCheckpoint(dir.path(), c));
  ASSIGN_OR_RETURN(std::string file,
                   ReadFile(dir.path() + "/" + CheckpointFileName(c.step)));
  return Seeds{{"valid", std::string(1, '\0') + file},
               {"valid_fixups", "\x03" + file}};
}

template <typename Message>
std::string Request(char selector, const Message& m) {
  return std::string(1, selector) + m.SerializeAsString();
}

Seeds RequestChecks() {
  Seeds seeds;
  JoinRequest join;
  join.set_protocol_version(Protocol::CURRENT);
  join.set_worker_id("host:123:abc");
  join.set_host("host");
  join.set_pid(123);
  join.set_replicas(2);
  join.set_address("10.0.0.5");
  seeds["join"] = Request(0, join);
  HeartbeatRequest hb;
  hb.set_generation(1);
  hb.set_worker_id("host:123:abc");
  hb.set_rank(1);
  hb.mutable_progress()->set_step(10);
  hb.mutable_progress()->set_loss(0.5);
  hb.mutable_progress()->mutable_times()->set_compute_s(0.01);
  seeds["heartbeat"] = Request(1, hb);
  KvSetRequest set;
  set.set_key("nccl/id");
  set.set_value("value");
  seeds["kv_set"] = Request(2, set);
  KvGetRequest get;
  get.set_key("nccl/id");
  seeds["kv_get"] = Request(3, get);
  KvWaitRequest wait;
  wait.add_keys("a");
  wait.add_keys("b");
  wait.set_timeout_ms(1000);
  seeds["kv_wait"] = Request(4, wait);
  KvAddRequest add;
  add.set_key("counter");
  add.set_delta(1);
  seeds["kv_add"] = Request(5, add);
  BeginEpochRequest epoch;
  epoch.set_rank(1);
  epoch.set_epoch(3);
  seeds["begin_epoch"] = Request(6, epoch);
  FinishRequest finish;
  finish.set_worker_id("host:123:abc");
  finish.set_error("");
  WorkerResult* r = finish.mutable_result();
  r->set_steps(100);
  r->set_test_accuracy(0.9);
  r->set_model("lenet5");
  r->add_epoch_results()->set_test_accuracy(-1);
  seeds["finish"] = Request(7, finish);
  StopRequest stop;
  stop.set_reason("user asked");
  seeds["stop"] = Request(8, stop);
  RegisterShardRequest reg;
  reg.set_protocol_version(Protocol::CURRENT);
  reg.set_shard_id("host:9:xyz");
  reg.set_address("10.0.0.1:5000");
  reg.set_host("host");
  reg.set_pid(9);
  seeds["register_shard"] = Request(9, reg);
  ShardHeartbeatRequest shb;
  shb.set_shard_id("host:9:xyz");
  shb.set_shard_index(1);
  shb.mutable_stats()->set_pushes(5);
  for (int i = 0; i < 9; ++i) shb.mutable_stats()->add_staleness_histogram(i);
  seeds["shard_heartbeat"] = Request(10, shb);
  PlanPartitionsRequest plan;
  plan.set_rank(0);
  plan.add_param_sizes(100);
  plan.add_param_sizes(10);
  seeds["plan_partitions"] = Request(11, plan);
  ClusterSpec cluster;
  cluster.set_min_workers(2);
  cluster.set_max_workers(4);
  seeds["cluster"] = Request(12, cluster);
  seeds["misc"] = std::string("\x0d", 1) + std::string(24, '\x01');
  return seeds;
}

absl::StatusOr<Seeds> SeedsFor(const std::string& target) {
  if (target == "mnist") return Mnist();
  if (target == "cifar10") return Cifar10();
  if (target == "checkpoint") return CheckpointSeeds();
  if (target == "request_checks") return RequestChecks();
  if (target == "shard") return ShardSeeds();
  if (target == "npy") return Npy();
  if (target == "csv") return Csv();
  if (target == "npz") return Npz();
  if (target == "image") return Image();
  if (target == "safetensors") return Safetensors();
  return absl::InvalidArgumentError(
      absl::StrCat("unknown target \"", target,
                   "\"; expected mnist, cifar10, checkpoint, request_checks, "
                   "shard, npy, npz, csv, image or safetensors"));
}

int Main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_seeds TARGET DIR\n");
    return 2;
  }
  absl::StatusOr<Seeds> seeds = SeedsFor(argv[1]);
  if (!seeds.ok()) {
    std::fprintf(stderr, "make_seeds: %s\n",
                 std::string(seeds.status().message()).c_str());
    return seeds.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  for (const auto& [name, bytes] : *seeds) {
    const std::string path = absl::StrCat(argv[2], "/", name);
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), bytes.size());
    if (!out.flush()) {
      std::fprintf(stderr, "make_seeds: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace fuzz
}  // namespace cohort

int main(int argc, char** argv) { return cohort::fuzz::Main(argc, argv); }

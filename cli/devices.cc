#include "cli/devices.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "worker/gpu/gpu_plugin.h"

namespace cohort {
namespace {

absl::Status BadValue(const std::string& value) {
  return absl::InvalidArgumentError(absl::StrCat(
      "--devices must be cpu:N (N in [1, 256]), gpu:all or gpu:I,J,... "
      "(CUDA device numbers), got \"",
      value, "\""));
}

}  // namespace

std::string Devices::ToString() const {
  if (gpus.empty()) return absl::StrCat("cpu:", cpu_replicas);
  return absl::StrCat("gpu:", absl::StrJoin(gpus, ","));
}

int Devices::replicas() const {
  return gpus.empty() ? cpu_replicas : static_cast<int>(gpus.size());
}

absl::StatusOr<Devices> ParseDevices(const std::string& value, int gpu_count,
                                     const std::string& no_gpu_reason) {
  Devices d;
  if (value.empty()) {
    if (gpu_count == 0) {
      d.cpu_replicas = 1;
      return d;
    }
    for (int g = 0; g < gpu_count; ++g) d.gpus.push_back(g);
    return d;
  }
  if (value.rfind("cpu:", 0) == 0) {
    if (!absl::SimpleAtoi(value.substr(4), &d.cpu_replicas) ||
        d.cpu_replicas < 1 || d.cpu_replicas > 256) {
      return BadValue(value);
    }
    return d;
  }
  if (value.rfind("gpu:", 0) != 0) return BadValue(value);
  if (gpu_count == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--devices=", value, ": this machine has no CUDA device (",
                     no_gpu_reason, "); use --devices=cpu:N"));
  }
  const std::string list = value.substr(4);
  if (list == "all") return ParseDevices("", gpu_count, no_gpu_reason);
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    int g = -1;
    if (!absl::SimpleAtoi(part, &g)) return BadValue(value);
    if (g < 0 || g >= gpu_count) {
      return absl::InvalidArgumentError(
          absl::StrCat("--devices=", value, ": GPU ", g,
                       " does not exist; this machine has ", gpu_count,
                       " (0 to ", gpu_count - 1, ")"));
    }
    if (std::find(d.gpus.begin(), d.gpus.end(), g) != d.gpus.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--devices=", value, ": GPU ", g, " is listed twice"));
    }
    d.gpus.push_back(g);
  }
  return d;
}

absl::StatusOr<Devices> ResolveDevices(const std::string& devices_flag,
                                       const std::string& replicas_flag) {
  if (!devices_flag.empty() && !replicas_flag.empty()) {
    return absl::InvalidArgumentError(
        "give --devices or its older name --replicas, not both");
  }
  const std::string value = devices_flag.empty() ? replicas_flag : devices_flag;
  // The default asks for every GPU, so a machine without an NVIDIA driver
  // is answered without loading the GPU plugin (and the CUDA libraries).
  if (value.empty() && !NvidiaDriverPresent()) return ParseDevices("", 0, "");
  // CPU devices (and malformed values) need no device discovery.
  if (!value.empty() && value.rfind("gpu:", 0) != 0) {
    return ParseDevices(value, 0, "");
  }
  const CudaDevices found = FindGpus();
  if (value.empty() && found.names.empty()) {
    // A driver without a usable GPU engine: say why before training on CPU.
    std::fprintf(stderr, "cohort: no GPU to train on (%s); using cpu:1\n",
                 found.reason.c_str());
  }
  return ParseDevices(value, static_cast<int>(found.names.size()),
                      found.reason);
}

absl::StatusOr<std::vector<Devices>> SplitDevices(const Devices& d,
                                                  int workers) {
  std::vector<Devices> out(workers, d);
  if (d.gpus.empty()) return out;
  if (static_cast<int>(d.gpus.size()) < workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        workers, " workers but ", d.gpus.size(), " GPUs (", d.ToString(),
        "): give each worker a GPU, or train on CPU devices "
        "(--devices=cpu:N)"));
  }
  for (Devices& w : out) w.gpus.clear();
  for (size_t i = 0; i < d.gpus.size(); ++i) {
    out[i % workers].gpus.push_back(d.gpus[i]);
  }
  return out;
}

}  // namespace cohort

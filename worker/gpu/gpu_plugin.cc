#include "worker/gpu/gpu_plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

#ifdef COHORT_WITH_CUDA
constexpr bool kBuiltWithCuda = true;
#else
constexpr bool kBuiltWithCuda = false;
#endif

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

std::string ExecutableDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, n);
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::vector<std::string> Candidates() {
  const std::string dir = ExecutableDir();
  return {absl::StrCat(dir, "/", kGpuPluginFile),
          absl::StrCat(dir, "/../lib/cohort/", kGpuPluginFile)};
}

// dlerror() for a missing library reads "libcudnn.so.9: cannot open shared
// object file: ..."; the user needs the library's name and what to do.
absl::Status OpenError(const std::string& path, const std::string& error) {
  if (absl::StrContains(error, "cannot open shared object file")) {
    const std::string library = error.substr(0, error.find(':'));
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU training needs ", library,
        ", which cannot be loaded (the GPU engine uses the CUDA 13 runtime, "
        "cuBLAS, cuDNN 9 and NCCL 2): install it or add its folder to "
        "LD_LIBRARY_PATH; dlopen(",
        path, "): ", error));
  }
  if (absl::StrContains(error, "undefined symbol")) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " does not belong to this cohort binary (", error,
        "): install the binary and its GPU plugin from one build"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("cannot open the GPU plugin ", path, ": ", error));
}

absl::Status CheckAbi(const std::string& path, const GpuPluginApi& api) {
  const GpuPluginApi mine;
  if (api.abi_version != mine.abi_version ||
      api.train_options_size != mine.train_options_size ||
      api.distributed_context_size != mine.distributed_context_size ||
      api.placement_size != mine.placement_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " was built from another version of cohort (interface ",
        api.abi_version, ", this binary's ", mine.abi_version,
        "): install the binary and its GPU plugin from one build"));
  }
  return absl::OkStatus();
}

absl::StatusOr<const GpuPluginApi*> Open() {
  // GPU tests and benchmarks link the engine in (gpu_plugin_entry, which
  // exports the entry point): use that copy rather than a file.
  if (auto linked = reinterpret_cast<GpuPluginEntry>(
          dlsym(RTLD_DEFAULT, kGpuPluginEntry))) {
    return linked();
  }
  if (!kBuiltWithCuda) {
    return absl::FailedPreconditionError(
        "this cohort was built without CUDA (--config=nocuda): train on CPU "
        "devices (--devices=cpu:N)");
  }
  std::string path;
  for (const std::string& c : Candidates()) {
    if (Exists(c)) {
      path = c;
      break;
    }
  }
  if (path.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the GPU plugin ", kGpuPluginFile, " is not installed (looked in ",
        Candidates()[0], " and ", Candidates()[1],
        "); reinstall cohort with it, or train on CPU devices "
        "(--devices=cpu:N)"));
  }
  // RTLD_NOW: a missing library or symbol is reported here, in one place,
  // rather than as a crash in the middle of training.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return OpenError(path, dlerror());
  auto entry = reinterpret_cast<GpuPluginEntry>(dlsym(handle, kGpuPluginEntry));
  if (entry == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is not a cohort GPU plugin (no ", kGpuPluginEntry, ")"));
  }
  const GpuPluginApi* api = entry();
  if (absl::Status s = CheckAbi(path, *api); !s.ok()) return s;
  return api;
}

}  // namespace

std::string DescribeGpuPlugin() {
  if (dlsym(RTLD_DEFAULT, kGpuPluginEntry) != nullptr) {
    return "linked into this binary";
  }
  if (!kBuiltWithCuda) return "none: this cohort was built without CUDA";
  const std::vector<std::string> candidates = Candidates();
  for (const std::string& c : candidates) {
    if (Exists(c)) return absl::StrCat("found at ", c);
  }
  return absl::StrCat("not installed (looked in ", candidates[0], " and ",
                      candidates[1], ")");
}

bool NvidiaDriverPresent() {
  return Exists("/dev/nvidiactl") || Exists("/proc/driver/nvidia/version");
}

absl::StatusOr<const GpuPluginApi*> LoadGpuPlugin() {
  static const absl::StatusOr<const GpuPluginApi*>* const loaded =
      new absl::StatusOr<const GpuPluginApi*>(Open());
  return *loaded;
}

CudaDevices FindGpus() {
  absl::StatusOr<const GpuPluginApi*> api = LoadGpuPlugin();
  if (!api.ok()) return {{}, std::string(api.status().message())};
  return (*api)->find_devices();
}

}  // namespace cohort

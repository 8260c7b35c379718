#include "common/machine_memory.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace cohort {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

// A fake /proc and /sys/fs/cgroup under the test's temporary directory.
class FakeTree {
 public:
  explicit FakeTree(const std::string& name) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
    probe_.proc_root = root_ + "/proc";
    probe_.cgroup_root = root_ + "/cgroup";
    probe_.address_space_limit = false;
  }
  void Write(const std::string& path, const std::string& text) {
    const std::string full = root_ + "/" + path;
    for (size_t i = 1; i < full.size(); ++i) {
      if (full[i] == '/') mkdir(full.substr(0, i).c_str(), 0755);
    }
    std::ofstream(full) << text;
  }
  const MemoryProbe& probe() const { return probe_; }

 private:
  std::string root_;
  MemoryProbe probe_;
};

TEST(MachineMemory, MemAvailableWithoutACgroupLimit) {
  FakeTree t("plain");
  t.Write("proc/meminfo", "MemTotal: 16777216 kB\nMemAvailable: 8388608 kB\n");
  t.Write("proc/self/cgroup", "0::/\n");
  absl::StatusOr<AvailableMemory> m = DetectAvailableMemory(t.probe());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->bytes, 8 * kGiB);
  EXPECT_EQ(m->source, "MemAvailable");
}

// A container's limit, set on a group above the process's own, is tighter
// than the machine's MemAvailable; reclaimable page cache counts as free.
TEST(MachineMemory, CgroupV2LimitAboveTheProcessCounts) {
  FakeTree t("v2");
  t.Write("proc/meminfo", "MemAvailable: 8388608 kB\n");
  t.Write("proc/self/cgroup", "0::/job/worker\n");
  t.Write("cgroup/job/memory.max", "4294967296\n");
  t.Write("cgroup/job/memory.current", "1073741824\n");
  t.Write("cgroup/job/memory.stat", "anon 1\ninactive_file 536870912\n");
  t.Write("cgroup/job/worker/memory.max", "max\n");
  absl::StatusOr<AvailableMemory> m = DetectAvailableMemory(t.probe());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->bytes, 4 * kGiB - kGiB / 2);
  EXPECT_EQ(m->source, "the cgroup memory limit of 4.0 GiB, 512.0 MiB in use");
}

TEST(MachineMemory, CgroupV1MemoryController) {
  FakeTree t("v1");
  t.Write("proc/meminfo", "MemAvailable: 8388608 kB\n");
  t.Write("proc/self/cgroup", "5:devices:/\n4:memory:/a\n0::/\n");
  t.Write("cgroup/memory/a/memory.limit_in_bytes", "2147483648\n");
  t.Write("cgroup/memory/a/memory.usage_in_bytes", "1073741824\n");
  t.Write("cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  absl::StatusOr<AvailableMemory> m = DetectAvailableMemory(t.probe());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->bytes, kGiB);
}

TEST(MachineMemory, UnlimitedV1GroupLeavesMemAvailable) {
  FakeTree t("v1max");
  t.Write("proc/meminfo", "MemAvailable: 1024 kB\n");
  t.Write("proc/self/cgroup", "4:memory:/\n");
  t.Write("cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_EQ(DetectAvailableMemory(t.probe())->bytes, 1 << 20);
}

TEST(MachineMemory, NoMeminfoIsNotFound) {
  FakeTree t("none");
  EXPECT_EQ(DetectAvailableMemory(t.probe()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(MachineMemory, ThisMachine) {
  absl::StatusOr<AvailableMemory> m = DetectAvailableMemory();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_GT(m->bytes, 0);
  EXPECT_FALSE(m->source.empty());
}

TEST(MachineMemory, BytesString) {
  EXPECT_EQ(BytesString(512), "512 bytes");
  EXPECT_EQ(BytesString(1536), "1.5 KiB");
  EXPECT_EQ(BytesString(int64_t{600} << 30), "600.0 GiB");
  EXPECT_EQ(BytesString(int64_t{6743098651584}), "6.1 TiB");
  EXPECT_EQ(BytesString(-5), "0 bytes");
}

}  // namespace
}  // namespace cohort

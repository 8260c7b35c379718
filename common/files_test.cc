#include "common/files.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace cohort {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(Files, WriteThenReadRoundTrips) {
  const std::string path = TempPath("roundtrip.bin");
  const std::string data("a\0b\nc", 5);
  ASSERT_TRUE(WriteFileAtomically(path, data).ok());
  absl::StatusOr<std::string> back = ReadFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, data);
  ASSERT_TRUE(WriteFileAtomically(path, "new").ok());
  EXPECT_EQ(*ReadFile(path), "new");
}

TEST(Files, MissingFileIsNotFoundAndNamesThePath) {
  absl::StatusOr<std::string> r = ReadFile(TempPath("does-not-exist"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("does-not-exist"), std::string::npos);
}

TEST(Files, UnwritableDirectoryFailsAndLeavesNothing) {
  absl::Status s = WriteFileAtomically("/nonexistent-dir/x.json", "{}");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent-dir"), std::string::npos);
}

TEST(Files, ReadRegularFileReadsUpToItsLimit) {
  const std::string path = TempPath("limit.txt");
  ASSERT_TRUE(WriteFileAtomically(path, "0123456789").ok());
  EXPECT_EQ(*ReadRegularFile(path, 10, "job spec"), "0123456789");
  absl::StatusOr<std::string> r = ReadRegularFile(path, 9, "job spec");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "job spec " + path +
                " is larger than 9 bytes; it should be a short text file");
  r = ReadRegularFile(TempPath("missing.txt"), 10, "job spec");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "cannot open job spec " +
                                      TempPath("missing.txt") +
                                      ": No such file or directory");
}

// What is not a short regular file or a pipe is refused before a byte is
// read: /dev/zero would never end. A FIFO without a writer would block
// forever, or read as an empty spec: refused at once.
TEST(Files, ReadRegularFileRefusesDevicesFifosAndDirectories) {
  absl::StatusOr<std::string> r =
      ReadRegularFile("/dev/zero", int64_t{16} << 20, "job spec");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "job spec /dev/zero is a character device, not a regular file");
  const std::string fifo = TempPath("spec.fifo");
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  r = ReadRegularFile(fifo, 100, "job spec");
  EXPECT_EQ(r.status().message(),
            "job spec " + fifo + " is a FIFO that nothing writes to");
  r = ReadRegularFile(TempPath(""), 100, "job spec");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("is a directory"), std::string::npos);
}

// What `--job=<(command)` hands over: a pipe with a writer.
TEST(Files, ReadRegularFileReadsAPipe) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::thread writer([&] {
    usleep(100000);  // the reader waits for it
    const char text[] = "name: \"piped\"\n";
    ASSERT_EQ(write(fds[1], text, sizeof(text) - 1),
              static_cast<ssize_t>(sizeof(text) - 1));
    close(fds[1]);
  });
  absl::StatusOr<std::string> r = ReadRegularFile(
      "/proc/self/fd/" + std::to_string(fds[0]), 100, "job spec");
  writer.join();
  close(fds[0]);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "name: \"piped\"\n");
  // And a pipe longer than the limit is refused like a file.
  ASSERT_EQ(pipe(fds), 0);
  std::thread big([&] {
    const std::string bytes(200, 'x');
    EXPECT_GT(write(fds[1], bytes.data(), bytes.size()), 100);
    close(fds[1]);
  });
  r = ReadRegularFile("/proc/self/fd/" + std::to_string(fds[0]), 100,
                      "job spec");
  big.join();
  close(fds[0]);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

// A rename would replace whatever is at the target: a FIFO, a device node
// (as root, /dev/null itself) or a symbolic link must be refused and left
// as it was, with one line naming what it is.
TEST(Files, WriteFileAtomicallyRefusesWhatIsNotARegularFile) {
  const std::string fifo = TempPath("out.fifo");
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  absl::Status s = WriteFileAtomically(fifo, "{}");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "cannot write " + fifo +
                             ": it is a FIFO, not a regular file, and cohort "
                             "replaces only regular files");
  struct stat st;
  ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(CheckCanWriteFile(fifo).message(), s.message());

  const std::string target = TempPath("link-target.txt");
  const std::string link = TempPath("out.link");
  ASSERT_TRUE(WriteFileAtomically(target, "kept").ok());
  unlink(link.c_str());
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  s = WriteFileAtomically(link, "{}");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("is a symbolic link"), std::string::npos) << s;
  EXPECT_FALSE(CheckCanWriteFile(link).ok());
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(*ReadFile(target), "kept");

  EXPECT_EQ(WriteFileAtomically(TempPath(""), "{}").message(),
            "cannot write " + TempPath("") + ": it is a directory");
}

// Only root can make a device node; the node is a copy of /dev/null's.
TEST(Files, WriteFileAtomicallyLeavesADeviceNodeAlone) {
  if (geteuid() != 0) GTEST_SKIP() << "making a device node needs root";
  const std::string node = TempPath("null.node");
  unlink(node.c_str());
  ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  const absl::Status s = WriteFileAtomically(node, "report");
  EXPECT_EQ(s.message(), "cannot write " + node +
                             ": it is a character device, not a regular "
                             "file, and cohort replaces only regular files");
  EXPECT_FALSE(CheckCanWriteFile(node).ok());
  struct stat st;
  ASSERT_EQ(lstat(node.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  unlink(node.c_str());
}

TEST(Files, CheckCanWriteFileAcceptsNewAndRegularFiles) {
  const std::string path = TempPath("regular.json");
  unlink(path.c_str());
  EXPECT_TRUE(CheckCanWriteFile(path).ok());
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  EXPECT_TRUE(CheckCanWriteFile(path).ok());
  ASSERT_TRUE(WriteFileAtomically(path, "new").ok());
  EXPECT_EQ(*ReadFile(path), "new");
}

TEST(Files, SameFileComparesIdentityNotNames) {
  const std::string a = TempPath("same-a.npy");
  const std::string hard = TempPath("same-hard.npy");
  const std::string soft = TempPath("same-soft.npy");
  ASSERT_TRUE(WriteFileAtomically(a, "x").ok());
  unlink(hard.c_str());
  unlink(soft.c_str());
  ASSERT_EQ(link(a.c_str(), hard.c_str()), 0);
  ASSERT_EQ(symlink(a.c_str(), soft.c_str()), 0);
  EXPECT_TRUE(SameFile(a, hard));
  EXPECT_TRUE(SameFile(soft, a));
  EXPECT_TRUE(SameFile(TempPath("./same-a.npy"), a));
  EXPECT_FALSE(SameFile(a, TempPath("roundtrip.bin")));
  EXPECT_FALSE(SameFile(a, TempPath("no-such-file")));
}

// ReadFile must not wait for a writer that never comes.
TEST(Files, ReadFileRefusesAFifoNobodyWritesToAtOnce) {
  const std::string fifo = TempPath("read.fifo");
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<std::string> r = ReadFile(fifo);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("is a FIFO"), std::string::npos)
      << r.status();
  r = ReadFile("/dev/zero");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cohort

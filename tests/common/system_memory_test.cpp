// The host backend's capacity honours the cgroup the process is in (v2 and v1, nested paths),
// so a container's limit gives an OutOfMemoryError rather than the kernel's OOM killer.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "common/system_memory.hpp"
#include "memscope/backend.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/errors.hpp"
#include "memscope/units.hpp"

namespace memscope::detail {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The one reader of /proc and /sys files: whole files past its buffer, nothing for what cannot
// be opened or read (a directory opens but does not read), and no descriptor left to a child
// that `memscope run` forks while a watcher thread reads.
TEST(SmallFiles, WholeFilesAndNothingForWhatCannotBeRead) {
  const std::optional<std::string> maps = read_proc_file(static_cast<int>(::getpid()), "maps");
  ASSERT_TRUE(maps.has_value());
  EXPECT_GT(maps->size(), 4096U);  // longer than one read
  EXPECT_EQ(maps->substr(0, 64), read_text("/proc/self/maps").substr(0, 64));
  EXPECT_EQ(read_small_file("/proc"), std::nullopt);
  EXPECT_EQ(read_small_file("/nonexistent/memscope"), std::nullopt);
  EXPECT_EQ(read_proc_file(0x7ffffff0, "status"), std::nullopt);  // no such process
}

TEST(SmallFiles, NoDescriptorOutlivesTheRead) {
  const auto open_fds = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                         std::filesystem::directory_iterator{});
  };
  const auto before = open_fds();
  for (int i = 0; i < 100; ++i) (void)read_proc_file(static_cast<int>(::getpid()), "status");
  (void)read_small_file("/proc");
  EXPECT_EQ(open_fds(), before);
}

// A hybrid machine (this one's layout): v1 memory controller plus a v2 mount with no memory.
TEST(CgroupDirs, FindsTheV1MemoryHierarchyAndTheV2One) {
  const std::string cgroup = "9:name=systemd:/\n4:memory:/process_api/3ec6\n3:cpuset:/\n0::/\n";
  const std::string mountinfo =
      "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
      "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
      "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
  const std::vector<CgroupDir> dirs = memory_cgroup_dirs(cgroup, mountinfo);
  ASSERT_EQ(dirs.size(), 2U);
  EXPECT_EQ(dirs[0].path, "/sys/fs/cgroup/memory/process_api/3ec6");
  EXPECT_EQ(dirs[0].mount_point, "/sys/fs/cgroup/memory");
  EXPECT_FALSE(dirs[0].v2);
  EXPECT_EQ(dirs[1].path, "/sys/fs/cgroup/unified");
  EXPECT_TRUE(dirs[1].v2);
}

// A container that bind-mounts its own cgroup as the root of the v2 hierarchy.
TEST(CgroupDirs, StripsTheMountRootOfABindMountedContainerCgroup) {
  const std::string cgroup = "0::/kubepods/pod1/abc/worker\n";
  const std::string mountinfo =
      "1 0 0:5 /kubepods/pod1/abc /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw\n";
  const std::vector<CgroupDir> dirs = memory_cgroup_dirs(cgroup, mountinfo);
  ASSERT_EQ(dirs.size(), 1U);
  EXPECT_EQ(dirs[0].path, "/sys/fs/cgroup/worker");
  EXPECT_EQ(dirs[0].mount_point, "/sys/fs/cgroup");
  EXPECT_TRUE(dirs[0].v2);
}

TEST(CgroupDirs, IgnoresMalformedLines) {
  EXPECT_TRUE(memory_cgroup_dirs("garbage\n::\n4:memory\n", "no dash here\n - x\n").empty());
}

// The walk up a hierarchy, on a tree of files made here (what `memscope info` and the host
// backend both read): the tightest limit wins and says where it is set; v2's "max" and v1's
// "no limit" page counter (about 2^63) are no limit but show the files were readable; the
// usage is the cgroup's own.
// The v2 directory a/b of the tree below, whose memory.max says "max".
CgroupDir none_dir(const std::filesystem::path& root) {
  return {(root / "a" / "b").string(), (root / "a" / "b").string(), true, "/a/b"};
}

TEST(CgroupLimit, TheTightestLimitOnTheWayUpAndWhereItIsSet) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("memscope-cgroup-" + std::to_string(::getpid()));
  std::filesystem::create_directories(root / "a" / "b");
  const auto write = [](const std::filesystem::path& file, const char* text) {
    std::ofstream(file) << text;
  };
  write(root / "memory.limit_in_bytes", "9223372036854771712\n");  // v1's "no limit"
  write(root / "a" / "memory.limit_in_bytes", "1073741824\n");
  write(root / "a" / "memory.usage_in_bytes", "4096\n");
  write(root / "a" / "b" / "memory.limit_in_bytes", "9223372036854771712\n");
  write(root / "a" / "b" / "memory.usage_in_bytes", "512\n");
  const CgroupDir v1{(root / "a" / "b").string(), root.string(), false, "/a/b"};
  const CgroupLimit limit = cgroup_limit(v1);
  EXPECT_EQ(limit.limit, std::size_t{1} << 30);
  EXPECT_EQ(limit.usage, 4096U);  // the limiting cgroup's
  EXPECT_EQ(limit.at, (root / "a").string());
  EXPECT_TRUE(limit.readable);
  EXPECT_EQ(cgroup_usage(v1), std::optional<std::size_t>(512));  // its own

  write(root / "a" / "b" / "memory.max", "max\n");
  const CgroupLimit none = cgroup_limit(none_dir(root));
  EXPECT_EQ(none.limit, 0U);
  EXPECT_TRUE(none.at.empty());
  EXPECT_TRUE(none.readable);
  const CgroupDir missing{(root / "nowhere").string(), (root / "nowhere").string(), true, "/"};
  EXPECT_FALSE(cgroup_limit(missing).readable);
  EXPECT_EQ(cgroup_usage(missing), std::nullopt);

  // Across hierarchies (what `memscope info` shows and the host backend's capacity both use):
  // the limited one wins wherever it stands; the first when none is limited; none of none.
  const std::vector<CgroupDir> both{none_dir(root), v1};
  const TightestCgroup tightest = tightest_cgroup(both);
  ASSERT_EQ(tightest.dir, &both[1]);
  EXPECT_EQ(tightest.limit.limit, std::size_t{1} << 30);
  const std::vector<CgroupDir> unlimited{none_dir(root), missing};
  EXPECT_EQ(tightest_cgroup(unlimited).dir, &unlimited[0]);
  EXPECT_EQ(tightest_cgroup(unlimited).limit.limit, 0U);
  EXPECT_EQ(tightest_cgroup({}).dir, nullptr);
  std::filesystem::remove_all(root);
}

// The real thing: a child cgroup with a 256 MiB limit below this process's own cgroup, a child
// process moved into it, and the host backend's capacity and OOM behaviour seen from there.
TEST(CgroupLimit, HostBackendCapacityIsTheOwnCgroupsLimit) {
  const std::vector<CgroupDir> dirs =
      memory_cgroup_dirs(read_text("/proc/self/cgroup"), read_text("/proc/self/mountinfo"));
  constexpr std::size_t kLimit = 256 * MiB;
  std::string made;
  bool v2 = false;
  for (const CgroupDir& dir : dirs) {
    const std::string child = dir.path + "/memscope-test-" + std::to_string(::getpid());
    std::error_code ec;
    if (!std::filesystem::create_directory(child, ec)) continue;
    std::ofstream(child + (dir.v2 ? "/memory.max" : "/memory.limit_in_bytes")) << kLimit;
    if (read_text(child + (dir.v2 ? "/memory.max" : "/memory.limit_in_bytes")) !=
        std::to_string(kLimit) + "\n") {
      std::filesystem::remove(child, ec);
      continue;
    }
    made = child;
    v2 = dir.v2;
    break;
  }
  if (made.empty()) {
    GTEST_SKIP() << "no memory cgroup of this process accepts a child cgroup with a limit here "
                    "(needs a writable cgroup v1 memory hierarchy, or v2 with the memory "
                    "controller delegated)";
  }
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::ofstream(made + "/cgroup.procs") << ::getpid() << std::flush;
    const std::unique_ptr<Backend> host = make_backend("host");
    if (host->capacity() != kLimit) ::_exit(2);
    if (host->free_bytes() > kLimit) ::_exit(3);
    CachingAllocator allocator(make_backend("host"));
    try {
      void* p = allocator.allocate(512 * MiB);
      allocator.deallocate(p);
      ::_exit(4);
    } catch (const OutOfMemoryError&) {
      ::_exit(0);
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  std::error_code ec;
  std::filesystem::remove(made, ec);
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "2: capacity is not the cgroup's limit, 3: free bytes above the limit, 4: allocating "
         "twice the limit succeeded (cgroup "
      << (v2 ? "v2 " : "v1 ") << made << ")";
}

}  // namespace
}  // namespace memscope::detail

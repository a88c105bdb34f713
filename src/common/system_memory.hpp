// What the kernel says about the machine's memory: the host backend's capacity and free bytes,
// and the cgroup limit `memscope info` and `memscope run` show (include/memscope/host_info.hpp).
// In common because both the backends and the probes read it.
//
// A container's real ceiling is its cgroup's, not MemTotal: the limit is the smallest one on the
// path from this process's own cgroup up to the root of the hierarchy, in cgroup v2
// (memory.max) and in cgroup v1 (memory.limit_in_bytes), whichever are mounted. Exceeding it
// wakes the kernel's OOM killer, so the allocator must see it as the device's capacity.
// Thread safety: pure functions over files; call from any thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memscope::detail {

// The whole of a small file (/proc, /sys); nullopt when it cannot be opened or read.
[[nodiscard]] std::optional<std::string> read_small_file(const std::string& path);

// The whole of /proc/<pid>/<name> (stat, status, cmdline, environ); nullopt when it cannot be
// opened or read, which for /proc means the process has gone (or belongs to someone else).
[[nodiscard]] std::optional<std::string> read_proc_file(int pid, const char* name);

struct SystemMemory {
  std::size_t total = 0;      // MemTotal, or the cgroup limit when lower
  std::size_t available = 0;  // MemAvailable, or what is left under the cgroup limit when lower
};

// Reads /proc/meminfo and the process's cgroups; returns zeros for fields it cannot read.
[[nodiscard]] SystemMemory read_system_memory() noexcept;

// The memory cgroup directories of this process, innermost first, one per mounted hierarchy
// that has the memory controller (v2, v1): e.g. /sys/fs/cgroup/memory/process_api/abc.
// Found from /proc/self/cgroup and the mount points in /proc/self/mountinfo; empty when none.
struct CgroupDir {
  std::string path;         // the process's cgroup in this hierarchy
  std::string mount_point;  // where the hierarchy is mounted: the walk up stops there
  bool v2 = false;     // memory.max / memory.current, else memory.limit_in_bytes / usage_in_bytes
  std::string cgroup;  // the cgroup as /proc/self/cgroup names it ("/user.slice/...")
};
[[nodiscard]] std::vector<CgroupDir> memory_cgroup_dirs(std::string_view proc_self_cgroup,
                                                        std::string_view proc_self_mountinfo);

struct CgroupLimit {
  std::size_t limit = 0;  // the smallest limit on the way to the root; 0 when none is set
  std::size_t usage = 0;  // the usage of the cgroup that sets that limit
  std::string at;         // the directory of the cgroup that sets it; empty when none
  bool readable = false;  // some limit file on the way could be read ("max" included)
};
// Walks from dir.path up to (and including) dir.mount_point and returns the tightest limit.
// "max" (v2) and v1's "no limit" (the largest page counter, about 2^63) are no limit.
[[nodiscard]] CgroupLimit cgroup_limit(const CgroupDir& dir);

// Of every hierarchy's directory, the one with the tightest limit (cgroup_limit), and that limit;
// the first directory and no limit when none sets one; a null `dir` when `dirs` is empty.
struct TightestCgroup {
  const CgroupDir* dir = nullptr;  // an element of the `dirs` given
  CgroupLimit limit;
};
[[nodiscard]] TightestCgroup tightest_cgroup(const std::vector<CgroupDir>& dirs);

// The memory in use by the cgroup of `dir` itself (memory.current / memory.usage_in_bytes);
// nullopt when the file cannot be read.
[[nodiscard]] std::optional<std::size_t> cgroup_usage(const CgroupDir& dir);

}  // namespace memscope::detail

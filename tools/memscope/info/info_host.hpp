// `memscope info`, host side: the machine's memory (/proc/meminfo) and the memory limit of the
// cgroup this process runs in, as plain values.
//
// Errors: read_host_info() never throws for what the machine does not offer (no swap, no cgroup
// memory controller, unreadable files): those fields stay unknown (-1 / empty) and `note` says
// why. It throws InputFailure only when /proc/meminfo itself cannot be read.
#pragma once

#include <cstdint>
#include <string>

namespace memscope::cli {

struct CgroupMemory {
  int version = 0;       // 1 or 2; 0: no memory controller found
  std::string path;      // this process's cgroup ("/user.slice/..."), as /proc/self/cgroup says
  std::string limit_at;  // the cgroup whose limit applies (the lowest on the way up); empty: none
  std::int64_t limit = -1;    // bytes; -1: no limit ("max", or v1's "unlimited" page counter)
  std::int64_t current = -1;  // bytes in use by this cgroup (memory.current / usage_in_bytes)
  std::string note;           // why something is unknown; empty when all was read
};

struct HostInfo {
  std::int64_t mem_total = -1;  // MemTotal, bytes
  std::int64_t mem_available = -1;
  std::int64_t swap_total = -1;
  std::int64_t swap_free = -1;
  CgroupMemory cgroup;
};

[[nodiscard]] HostInfo read_host_info();

// The memory cgroup of this process: /proc/self/cgroup names it, /proc/self/mountinfo says where
// its hierarchy is mounted. Never throws.
[[nodiscard]] CgroupMemory read_cgroup_memory();

}  // namespace memscope::cli

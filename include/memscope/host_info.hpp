// The machine's memory as `memscope info` and `memscope run` report it: /proc/meminfo's totals
// and the memory limit of the cgroup this process runs in, as plain values.
//
// The cgroup limit is the one the host backend takes for its capacity (the same reader): the
// tightest limit on the path from this process's cgroup up to the root of each mounted memory
// hierarchy (cgroup v2's memory.max, v1's memory.limit_in_bytes); "max" and v1's "unlimited"
// page counter are no limit.
//
// Thread safety: pure functions over files; call from any thread. Ownership: values.
// Errors: nothing the machine may lack (no swap, no memory controller, unreadable cgroup files)
// throws: those fields stay unknown (-1 / empty) and `note` says why. read_host_info() throws
// BackendUnavailableError only when /proc/meminfo itself cannot be read.
#pragma once

#include <cstdint>
#include <string>

namespace memscope {

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
// its hierarchy is mounted. Where several hierarchies have the memory controller, the one with
// the tightest limit (else the first listed). Never throws.
[[nodiscard]] CgroupMemory read_cgroup_memory() noexcept;

}  // namespace memscope

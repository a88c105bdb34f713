// What the kernel says about the machine's memory: the host backend's capacity and free bytes.
// Takes the cgroup (v2) limit into account, since a container's real ceiling is its cgroup's.
#pragma once

#include <cstddef>

namespace memscope::detail {

struct SystemMemory {
  std::size_t total = 0;      // MemTotal, or the cgroup's memory.max when lower
  std::size_t available = 0;  // MemAvailable, or what is left under the cgroup's limit
};

// Reads /proc/meminfo and /sys/fs/cgroup; returns zeros for fields it cannot read.
[[nodiscard]] SystemMemory read_system_memory() noexcept;

}  // namespace memscope::detail

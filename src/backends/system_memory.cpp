#include "backends/system_memory.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace memscope::detail {
namespace {

// Reads a small file into buf; returns false if it cannot be read.
bool read_file(const char* path, char* buf, std::size_t size) noexcept {
  std::FILE* f = std::fopen(path, "re");
  if (f == nullptr) return false;
  const std::size_t n = std::fread(buf, 1, size - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  return n > 0;
}

// "memory.max" holds a number or "max".
bool read_cgroup_value(const char* path, std::size_t& value) noexcept {
  char buf[64];
  if (!read_file(path, buf, sizeof buf)) return false;
  unsigned long long v = 0;
  if (std::sscanf(buf, "%llu", &v) != 1) return false;
  value = static_cast<std::size_t>(v);
  return true;
}

std::size_t meminfo_field(const char* text, const char* key) noexcept {
  const char* p = std::strstr(text, key);
  if (p == nullptr) return 0;
  unsigned long long kib = 0;
  if (std::sscanf(p + std::strlen(key), " %llu", &kib) != 1) return 0;
  return static_cast<std::size_t>(kib) * 1024;
}

}  // namespace

SystemMemory read_system_memory() noexcept {
  SystemMemory m;
  char buf[4096];
  if (read_file("/proc/meminfo", buf, sizeof buf)) {
    m.total = meminfo_field(buf, "MemTotal:");
    m.available = meminfo_field(buf, "MemAvailable:");
  }
  std::size_t limit = 0;
  std::size_t used = 0;
  if (read_cgroup_value("/sys/fs/cgroup/memory.max", limit) && limit < m.total) {
    m.total = limit;
    if (read_cgroup_value("/sys/fs/cgroup/memory.current", used)) {
      m.available = std::min(m.available, limit > used ? limit - used : 0);
    }
  }
  return m;
}

}  // namespace memscope::detail

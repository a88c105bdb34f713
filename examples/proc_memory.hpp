// What Linux says about this process's resident memory, for the demo's tables: the current RSS
// (/proc/self/statm), the kernel's high-water mark (VmHWM in /proc/self/status) and its reset
// (writing "5" to /proc/self/clear_refs). Deliberately tiny and self-contained; the library's
// HostProbe does the same with exact nested peak windows.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

namespace memscope::demo {

// Resident bytes now: statm's second field is in pages.
inline std::int64_t current_rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size_pages = 0;
  std::int64_t resident_pages = 0;
  statm >> size_pages >> resident_pages;
  return resident_pages * static_cast<std::int64_t>(::sysconf(_SC_PAGESIZE));
}

// VmHWM: the peak RSS since the process started or the last reset_peak_rss(); nullopt when
// the kernel does not report it.
inline std::optional<std::int64_t> peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      std::int64_t kib = 0;
      status >> kib;  // the unit that follows is always "kB"
      return kib * 1024;
    }
    status.ignore(1 << 16, '\n');
  }
  return std::nullopt;
}

// Resets VmHWM to the current RSS. False where clear_refs cannot be written (some containers,
// older kernels): VmHWM then keeps the peak since the process started.
inline bool reset_peak_rss() {
  std::ofstream clear_refs("/proc/self/clear_refs");
  if (!clear_refs) return false;
  clear_refs << "5";
  clear_refs.flush();
  return static_cast<bool>(clear_refs);
}

}  // namespace memscope::demo

// Started by test_proc_files.cpp through fork and execve from a process holding hundreds of MiB:
// writes "process_peak_rss() VmHWM ru_maxrss mode" (bytes; mode: the probe's, or "none") to the
// file named by its last argument.
//   peak_rss_child OUT          reads the figures at once
//   peak_rss_child reset OUT    first touches 32 MiB and frees it, then opens a HostProbe, which
//                               resets VmHWM (clear_refs) where it may
#include <sys/mman.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "memscope/host_probe.hpp"

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 3 && std::string(argv[1]) == "reset")) return 2;
  std::unique_ptr<memscope::HostProbe> probe;
  if (argc == 3) {
    constexpr std::size_t kBytes = std::size_t{32} << 20;
    void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 4;
    std::memset(p, 1, kBytes);
    munmap(p, kBytes);
    probe = std::make_unique<memscope::HostProbe>();
  }
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 3;
  const std::int64_t peak = memscope::process_peak_rss();
  const std::int64_t hwm = memscope::read_host_memory().hwm;
  std::ofstream(argv[argc - 1]) << peak << ' ' << hwm << ' '
                                << static_cast<std::int64_t>(usage.ru_maxrss) * 1024 << ' '
                                << (probe ? probe->mode_name() : std::string("none")) << '\n';
  return 0;
}

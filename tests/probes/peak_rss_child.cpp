// Started by test_proc_files.cpp through fork and execve from a process holding hundreds of MiB:
// writes "process_peak_rss() VmHWM ru_maxrss" (bytes) to the file named by its argument.
#include <sys/resource.h>

#include <cstdint>
#include <fstream>

#include "memscope/host_probe.hpp"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 3;
  const std::int64_t peak = memscope::process_peak_rss();
  const std::int64_t hwm = memscope::read_host_memory().hwm;
  std::ofstream(argv[1]) << peak << ' ' << hwm << ' '
                         << static_cast<std::int64_t>(usage.ru_maxrss) * 1024 << '\n';
  return 0;
}

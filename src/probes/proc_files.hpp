// Reading /proc/<pid>/{status,statm} with no heap allocation: the files are kept open, read
// with pread at offset 0 into a caller's stack buffer and parsed by hand. The peak-window code
// calls these while holding a lock, several times per stage, so they must be cheap and must
// not touch the allocator they may be measuring.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/errno_text.hpp"  // errno_text(), for the messages of every /proc reader
#include "memscope/host_probe.hpp"

namespace memscope::detail {

// Owns one file descriptor. Movable, not copyable.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() noexcept;

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
  int release() noexcept {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// Opens /proc/<pid>/<name> (pid 0: /proc/self). Invalid Fd on failure, errno set.
[[nodiscard]] Fd open_proc(int pid, const char* name, int flags) noexcept;
// Writes "/proc/<pid>/<name>" (or /proc/self/...) into `out` for messages.
void proc_path(int pid, const char* name, char* out, std::size_t size) noexcept;

// Parses the text of /proc/<pid>/status. False when VmRSS or VmHWM is missing (a process that
// has exited, or a kernel thread).
[[nodiscard]] bool parse_status(const char* text, std::size_t length, HostMemory& out) noexcept;
// Parses the text of /proc/<pid>/statm: the resident pages, returned in bytes.
[[nodiscard]] bool parse_statm(const char* text, std::size_t length, std::int64_t& rss) noexcept;

[[nodiscard]] bool read_status(int fd, HostMemory& out) noexcept;
[[nodiscard]] bool read_statm(int fd, std::int64_t& rss) noexcept;

// getrusage(RUSAGE_SELF).ru_maxrss in bytes. The kernel computes it as the larger of the
// process's VmHWM and the peaks of threads that exited, so it is an upper bound on this
// process's VmHWM that costs a fraction of reading status.
[[nodiscard]] std::int64_t self_maxrss_bound() noexcept;

}  // namespace memscope::detail

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

// getrusage(RUSAGE_SELF).ru_maxrss in bytes: the larger of the kernel's high-water mark of
// this process (the part of VmHWM that clear_refs erases) and the peaks recorded when threads
// exited. It costs a fraction of reading status. Not a strict bound on VmHWM since Linux 6.2:
// status shows max(that mark, the exact RSS), and the mark comes from the approximate sum (see
// rss_counter_slack).
[[nodiscard]] std::int64_t self_maxrss_bound() noexcept;
// The same figure where it is this process's own: 0 while ru_maxrss is no more than what it
// inherited across execve (the replaced image's mark, which Linux keeps: a program started by a
// large process reads that process's size), so that it can stand for a peak this process reached
// (process_peak_rss(), the process-lifetime peak kept before clear_refs), not only bound one.
[[nodiscard]] std::int64_t self_maxrss_peak() noexcept;
// This process's own high-water mark before clear_refs erases it: self_maxrss_peak(), or, while
// an inherited mark hides it, VmHWM read from status (dearer).
[[nodiscard]] std::int64_t self_high_water_mark() noexcept;

// The "Threads:" line of /proc/<pid>/status, read through `fd`; 0 when it cannot be read.
[[nodiscard]] std::int64_t read_status_threads(int fd) noexcept;

// How far the kernel's approximate RSS (statm, VmHWM, ru_maxrss) may be from the exact sum, in
// bytes: the rule of the running kernel (uname), for a process with `threads` threads. The
// online CPUs are counted once per process (CPU hotplug during a run is not followed).
//   Linux >= 6.2: RSS is three per-CPU counters (anon, file, shmem; percpu_counter), each
//     folding a CPU's local delta into the total once it reaches the batch, max(32, 2 * online
//     CPUs) pages (lib/percpu_counter.c, compute_batch_value); a read of the total may miss
//     up to batch - 1 pages per online CPU and counter: 3 * (batch - 1) * cpus pages.
//   before: per-thread caches synced every 64 page faults (TASK_RSS_EVENTS_THRESH):
//     3 * 64 * threads pages.
[[nodiscard]] std::int64_t rss_counter_slack(std::int64_t threads) noexcept;
// True on kernels whose RSS counters are per-CPU (6.2 and later): the slack does not depend on
// the thread count.
[[nodiscard]] bool rss_counters_are_per_cpu() noexcept;

// Throws BackendError for /proc/<pid>/<file> that can no longer be read (errno says why): the
// process has probably exited.
[[noreturn]] void throw_process_gone(int pid, const char* file);

}  // namespace memscope::detail

// HostProbe: what Linux says about a process's resident memory (RSS), and peak windows over it.
//
// read() returns VmRSS with its RssAnon / RssFile / RssShmem parts and the kernel's peak
// (VmHWM) from /proc/<pid>/status; current_rss() is the cheap reading from /proc/<pid>/statm.
// Neither allocates: the files stay open and are read into a stack buffer and parsed by hand.
//
// Peak windows (open_window) give the highest RSS since each window opened. Any number may be
// open, nested or overlapping, and closed in any order; each follows the cascade rule of
// docs/design.md, so none loses a peak to another. Two modes:
//   "kernel-hwm"    the kernel's own high-water mark. Opening a window resets it (writing 5 to
//                   /proc/<pid>/clear_refs) after folding its value into the innermost open
//                   window. Every probe watching one process shares one window stack for that
//                   reason. Whatever else in the process writes clear_refs breaks this mode.
//                   The resets also lower what other tools read (VmHWM, getrusage's ru_maxrss,
//                   so /usr/bin/time and Slurm): process_peak_rss() keeps the lifetime peak.
//   "sampling 1ms"  the no-reset mode: never writes clear_refs. Used when clear_refs cannot be
//                   written (another user's process without ptrace rights, a locked-down
//                   container), with HostProbeOptions::force_sampling, or with
//                   MEMSCOPE_HOST_PEAK_MODE=no-reset: a thread reads RSS every interval while
//                   a window is open (it sleeps between samples and blocks when none is), so
//                   peaks shorter than the interval can be missed.
// mode_name() says which one a probe uses; reports must print it.
//
// Not exact to the byte: since Linux 6.2 the kernel keeps RSS in per-CPU counters, and VmHWM,
// statm and ru_maxrss come from their approximate sum. A window's peak is the maximum of
// VmHWM and every RSS reading the probe makes (status's VmRSS is the exact sum on recent
// kernels), and may differ from the true peak by up to peak_bound() bytes (docs/tracker.md
// says how it was measured).
//
// fork(): a probe on its own process follows it into a forked child (the child's reads are the
// child's), and a child forked while another thread is inside a probe does not deadlock; see
// src/probes/fork_guard.hpp.
//
// Thread safety: every probe method may be called from any thread, and windows may be opened
// and closed from any thread; one Window object is used by one thread at a time. Ownership: a
// Window keeps the state it needs alive, so it may outlive its probe. Errors: the constructor
// throws BackendUnavailableError when /proc/<pid> cannot be read, UsageError for bad options,
// ConfigError for a bad MEMSCOPE_HOST_PEAK_MODE; reads throw BackendError when the process has
// gone. Window::close() and destructors never throw.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "memscope/peak_windows.hpp"

namespace memscope {

// One reading of /proc/<pid>/status, in bytes.
struct HostMemory {
  std::int64_t rss = 0;        // VmRSS = rss_anon + rss_file + rss_shmem
  std::int64_t rss_anon = 0;   // RssAnon: heap, stacks, anonymous mappings
  std::int64_t rss_file = 0;   // RssFile: file-backed pages (code, mapped files)
  std::int64_t rss_shmem = 0;  // RssShmem: shared memory, tmpfs
  std::int64_t hwm = 0;        // VmHWM: the peak of rss since start or the last reset
};

// Reads /proc/<pid>/status once (pid 0: this process). Throws BackendError if it cannot.
[[nodiscard]] HostMemory read_host_memory(int pid = 0);

// The highest RSS of this process over its lifetime as far as memscope knows, in bytes: the
// maximum of VmHWM and ru_maxrss now, and of every value of the kernel's high-water mark that
// memscope read before resetting it (kernel-hwm windows lower VmHWM and ru_maxrss; this does
// not drop). Within the RSS counters' slack (HostProbe::peak_bound()). A forked child starts
// afresh. Throws BackendError if /proc/self/status cannot be read.
[[nodiscard]] std::int64_t process_peak_rss();

// MEMSCOPE_HOST_PEAK_MODE: unset, empty or "auto" is false (kernel-hwm where clear_refs can be
// written); "no-reset" or "sampling" is true (every probe samples and none writes clear_refs);
// anything else throws ConfigError naming the variable, the value and the allowed values.
[[nodiscard]] bool host_peak_no_reset_from_env();

enum class HostPeakMode { kernel_hwm, sampling };

struct HostProbeOptions {
  int pid = 0;  // 0: this process
  // The no-reset mode: sample even where clear_refs is writable, so VmHWM and ru_maxrss are
  // never lowered. MEMSCOPE_HOST_PEAK_MODE=no-reset sets it for every probe.
  bool force_sampling = false;
  std::chrono::microseconds sampling_interval{1000};  // > 0
};

namespace detail {
class HostPeakDomain;  // the shared window stack of one process (src/probes)
class ForkHooks;       // src/probes/fork_guard.hpp
}  // namespace detail

class HostProbe {
 public:
  explicit HostProbe(const HostProbeOptions& options = {});
  HostProbe(const HostProbe&) = delete;
  HostProbe& operator=(const HostProbe&) = delete;
  ~HostProbe() noexcept;

  [[nodiscard]] HostMemory read() const;
  [[nodiscard]] std::int64_t current_rss() const;  // bytes, from statm
  [[nodiscard]] int pid() const noexcept { return pid_; }
  [[nodiscard]] HostPeakMode mode() const noexcept { return mode_; }
  [[nodiscard]] const std::string& mode_name() const noexcept { return mode_name_; }
  // Why the probe samples instead of using the kernel's peak; empty in kernel-hwm mode.
  [[nodiscard]] const std::string& fallback_reason() const noexcept { return fallback_reason_; }
  // How far, in bytes, the kernel's approximate RSS counters may put a reading from the exact
  // value, by the running kernel's rule (docs/tracker.md): window peaks, begin and end values
  // are exact within this; in sampling mode peaks between samples can be missed as well.
  [[nodiscard]] std::int64_t peak_bound() const;

  class Window;
  // Opens a peak window starting now.
  [[nodiscard]] Window open_window();
  // Resets the kernel's peak (VmHWM) without disturbing any open window. No-op when sampling.
  void reset_peak();

 private:
  int pid_ = 0;
  HostPeakMode mode_ = HostPeakMode::kernel_hwm;
  std::string mode_name_;
  std::string fallback_reason_;
  int statm_fd_ = -1;
  int status_fd_ = -1;
  std::shared_ptr<detail::HostPeakDomain> domain_;
  std::unique_ptr<detail::ForkHooks> fork_hooks_;  // reopens the files in a forked child
};

// RAII peak window; closes when destroyed. Movable, not copyable.
class HostProbe::Window {
 public:
  Window(Window&&) noexcept = default;
  Window& operator=(Window&& other) noexcept;
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;
  ~Window() noexcept { close(); }

  struct Reading {
    std::int64_t current = 0;  // RSS now (when closed: when it closed)
    std::int64_t peak = 0;     // highest RSS since the window opened; >= current and begin
  };
  [[nodiscard]] std::int64_t begin() const noexcept { return begin_; }
  // The window so far; frozen at the final values once closed.
  [[nodiscard]] Reading read() const;
  // Closes the window (idempotent) and returns its final reading. If the process has gone,
  // the reading holds what was seen until then.
  Reading close() noexcept;
  [[nodiscard]] bool is_open() const noexcept { return node_ != nullptr && node_->open; }

  using Windows = PeakWindows<1>;

 private:
  friend class HostProbe;
  Window(std::shared_ptr<detail::HostPeakDomain> domain, std::unique_ptr<Windows::Window> node,
         std::int64_t begin)
      : domain_(std::move(domain)), node_(std::move(node)), begin_(begin) {}

  std::shared_ptr<detail::HostPeakDomain> domain_;
  std::unique_ptr<Windows::Window> node_;  // heap node: its address stays fixed across moves
  std::int64_t begin_ = 0;
  Reading final_{};
};

}  // namespace memscope

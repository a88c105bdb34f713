// HostProbe: picks the peak mode for a process and hands out windows on it.
#include "memscope/host_probe.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "common/env_switch.hpp"
#include "memscope/errors.hpp"
#include "probes/fork_guard.hpp"
#include "probes/host_peak_domain.hpp"
#include "probes/proc_files.hpp"
#include "probes/self_peak.hpp"

namespace memscope {
namespace {

std::string interval_name(std::chrono::microseconds interval) {
  auto us = interval.count();
  if (us % 1000000 == 0) return std::to_string(us / 1000000) + "s";
  if (us % 1000 == 0) return std::to_string(us / 1000) + "ms";
  return std::to_string(us) + "us";
}

int open_or_throw(int pid, const char* name) {
  detail::Fd fd = detail::open_proc(pid, name, O_RDONLY);
  if (!fd.valid()) {
    const std::string error = detail::errno_text(errno);
    char path[64];
    detail::proc_path(pid, name, path, sizeof path);
    throw BackendUnavailableError(std::string("memscope: host probe cannot read ") + path + " (" +
                                  error + "); it needs Linux /proc and a running process");
  }
  return fd.release();
}

}  // namespace

namespace detail {

// A probe's files, reopened in a forked child when the probe watches its own process.
class ProbeForkHooks final : public ForkHooks {
 public:
  ProbeForkHooks(int& pid, int statm_fd, int status_fd)
      : pid_(pid), statm_fd_(statm_fd), status_fd_(status_fd) {
    add_fork_hooks(ForkLevel::probe, *this);
  }
  ProbeForkHooks(const ProbeForkHooks&) = delete;
  ProbeForkHooks& operator=(const ProbeForkHooks&) = delete;
  ~ProbeForkHooks() override { remove_fork_hooks(ForkLevel::probe, *this); }

  void before_fork() noexcept override {}
  void after_fork_parent() noexcept override {}
  void after_fork_child() noexcept override {
    pid_ = static_cast<int>(getpid());
    reopen_self_proc(statm_fd_, "statm", O_RDONLY);
    reopen_self_proc(status_fd_, "status", O_RDONLY);
  }

 private:
  int& pid_;
  int statm_fd_;
  int status_fd_;
};

}  // namespace detail

std::int64_t process_peak_rss() {
  (void)detail::self_peak_seen();  // its fork hook exists before anything is noted
  const HostMemory m = read_host_memory(0);
  return std::max({detail::self_peak_seen(), m.hwm, m.rss, detail::self_maxrss_peak()});
}

bool host_peak_no_reset_from_env() {
  return detail::read_env_switch(
      {.name = "MEMSCOPE_HOST_PEAK_MODE",
       .off = {"", "auto"},
       .on = {"no-reset", "sampling"},
       .is_not = "a host peak mode",
       .use = "auto (kernel-hwm where clear_refs can be written) or no-reset (sampling, never "
              "writes clear_refs; also 'sampling')"});
}

HostMemory read_host_memory(int pid) {
  detail::Fd fd = detail::open_proc(pid, "status", O_RDONLY);
  HostMemory m;
  if (!fd.valid() || !detail::read_status(fd.get(), m)) detail::throw_process_gone(pid, "status");
  return m;
}

HostProbe::HostProbe(const HostProbeOptions& options)
    : pid_(options.pid == 0 ? static_cast<int>(getpid()) : options.pid) {
  const bool self = pid_ == getpid();  // follows this process into a forked child
  const int open_pid = self ? 0 : options.pid;
  if (options.pid < 0) {
    throw UsageError(
        "memscope: HostProbeOptions::pid must be 0 (this process) or a process id, not " +
        std::to_string(options.pid));
  }
  if (options.sampling_interval.count() <= 0) {
    throw UsageError("memscope: HostProbeOptions::sampling_interval must be positive, not " +
                     std::to_string(options.sampling_interval.count()) + "us");
  }
  detail::Fd statm(open_or_throw(open_pid, "statm"));
  detail::Fd status(open_or_throw(open_pid, "status"));
  if (self) (void)detail::self_peak_seen();  // before the first reset: a child resets it too
  if (options.force_sampling) {
    fallback_reason_ = "sampling forced by HostProbeOptions::force_sampling (no-reset mode)";
  } else if (host_peak_no_reset_from_env()) {
    fallback_reason_ = "sampling forced by MEMSCOPE_HOST_PEAK_MODE (no-reset mode)";
  } else {
    domain_ = detail::kernel_hwm_domain(options.pid, fallback_reason_);
  }
  if (domain_ != nullptr) {
    mode_ = HostPeakMode::kernel_hwm;
    mode_name_ = "kernel-hwm";
  } else {
    domain_ = detail::sampling_domain(options.pid, options.sampling_interval);
    mode_ = HostPeakMode::sampling;
    mode_name_ = "sampling " + interval_name(options.sampling_interval);
  }
  if (self) fork_hooks_ = std::make_unique<detail::ProbeForkHooks>(pid_, statm.get(), status.get());
  statm_fd_ = statm.release();
  status_fd_ = status.release();
}

HostProbe::~HostProbe() noexcept {
  fork_hooks_.reset();          // first: a fork now must not reopen closed descriptors
  detail::Fd statm(statm_fd_);  // closes
  detail::Fd status(status_fd_);
}

HostMemory HostProbe::read() const {
  HostMemory m;
  if (!detail::read_status(status_fd_, m)) detail::throw_process_gone(pid_, "status");
  return m;
}

std::int64_t HostProbe::current_rss() const {
  std::int64_t rss = 0;
  if (!detail::read_statm(statm_fd_, rss)) detail::throw_process_gone(pid_, "statm");
  return rss;
}

std::int64_t HostProbe::peak_bound() const {
  if (detail::rss_counters_are_per_cpu()) return detail::rss_counter_slack(1);
  return detail::rss_counter_slack(detail::read_status_threads(status_fd_));
}

HostProbe::Window HostProbe::open_window() {
  auto node = std::make_unique<Window::Windows::Window>();
  std::int64_t begin = domain_->open(*node);
  return Window(domain_, std::move(node), begin);
}

void HostProbe::reset_peak() {
  domain_->reset_peak();
}

HostProbe::Window& HostProbe::Window::operator=(Window&& other) noexcept {
  if (this != &other) {
    close();
    domain_ = std::move(other.domain_);
    node_ = std::move(other.node_);
    begin_ = other.begin_;
    final_ = other.final_;
  }
  return *this;
}

HostProbe::Window::Reading HostProbe::Window::read() const {
  if (!is_open()) return final_;
  return domain_->read(*node_);
}

HostProbe::Window::Reading HostProbe::Window::close() noexcept {
  if (is_open()) final_ = domain_->close(*node_);
  return final_;
}

}  // namespace memscope

// Sampling-mode peak windows: a thread reads RSS every interval while any window is open.
// This mode never writes clear_refs, so it leaves VmHWM and ru_maxrss alone.
#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <new>
#include <thread>

#include "memscope/errors.hpp"
#include "probes/fork_guard.hpp"
#include "probes/host_peak_domain.hpp"
#include "probes/proc_files.hpp"

namespace memscope::detail {
namespace {

class SamplingDomain final : public HostPeakDomain, private ForkHooks {
 public:
  SamplingDomain(int pid, bool self, Fd statm, std::chrono::microseconds interval)
      : pid_(pid), self_(self), statm_(std::move(statm)), interval_(interval) {
    add_fork_hooks(ForkLevel::domain, *this);
  }
  SamplingDomain(const SamplingDomain&) = delete;
  SamplingDomain& operator=(const SamplingDomain&) = delete;

  ~SamplingDomain() override {
    remove_fork_hooks(ForkLevel::domain, *this);
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  std::int64_t open(Windows::Window& w) override {
    std::lock_guard lock(mutex_);
    std::int64_t rss = 0;
    if (!sample(rss)) throw_process_gone(pid_, "statm");
    const bool was_idle = windows_.empty();
    windows_.open(w, {rss});
    // Started with the first window (and again in a forked child, which has no such thread).
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    if (was_idle) wake_.notify_one();  // the sampler blocks while no window is open
    return rss;
  }

  Reading read(const Windows::Window& w) override {
    std::lock_guard lock(mutex_);
    std::int64_t rss = 0;
    if (!sample(rss)) throw_process_gone(pid_, "statm");
    return {rss, windows_.peak(w)[0]};
  }

  Reading close(Windows::Window& w) noexcept override {
    std::lock_guard lock(mutex_);
    std::int64_t rss = last_rss_;
    (void)sample(rss);  // on failure keep the last sample: the process is gone
    std::int64_t peak = windows_.close(w)[0];
    return {rss, peak};
  }

  void reset_peak() override {}  // sampling keeps no kernel state to reset

 private:
  // Takes one sample into the innermost window. Caller holds mutex_.
  bool sample(std::int64_t& rss) noexcept {
    if (gone_ || !read_statm(statm_.get(), rss)) {
      gone_ = true;
      return false;
    }
    last_rss_ = rss;
    windows_.observe(0, rss);
    return true;
  }

  void run() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      if (windows_.empty() || gone_) {
        wake_.wait(lock);  // nothing to measure: sleep until a window opens
        continue;
      }
      std::int64_t rss = 0;
      (void)sample(rss);
      // Sleeps, never spins; woken early only to stop (or for a harmless extra sample).
      wake_.wait_for(lock, interval_);
    }
  }

  void before_fork() noexcept override {
    mutex_.lock();  // NOLINT(bugprone-unhandled-exception-at-new): std::mutex::lock
  }
  void after_fork_parent() noexcept override { mutex_.unlock(); }
  void after_fork_child() noexcept override {
    // The sampler thread and whatever waited on the condition variable stayed in the parent:
    // forget them without joining or destroying (either would wait for a thread that is not
    // here); open() starts a new thread when a window needs one.
    new (&thread_) std::thread();
    new (&wake_) std::condition_variable();
    if (self_) {
      pid_ = static_cast<int>(getpid());
      reopen_self_proc(statm_.get(), "statm", O_RDONLY);
    }
    mutex_.unlock();
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  Windows windows_;
  int pid_;
  const bool self_;
  Fd statm_;
  const std::chrono::microseconds interval_;
  std::int64_t last_rss_ = 0;
  bool gone_ = false;
  bool stop_ = false;
  std::thread thread_;  // started by the first open()
};

}  // namespace

std::shared_ptr<HostPeakDomain> sampling_domain(int pid, std::chrono::microseconds interval) {
  const int real_pid = pid == 0 ? static_cast<int>(getpid()) : pid;
  const bool self = real_pid == getpid();  // follows this process into a forked child
  const int open_pid = self ? 0 : pid;
  Fd statm = open_proc(open_pid, "statm", O_RDONLY);
  if (!statm.valid()) {
    char path[64];
    proc_path(pid, "statm", path, sizeof path);
    throw BackendUnavailableError(std::string("memscope: cannot read ") + path);
  }
  return std::make_shared<SamplingDomain>(real_pid, self, std::move(statm), interval);
}

}  // namespace memscope::detail

// Sampling-mode peak windows: a thread reads RSS every interval while any window is open.
#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "memscope/errors.hpp"
#include "probes/host_peak_domain.hpp"
#include "probes/proc_files.hpp"

namespace memscope::detail {
namespace {

class SamplingDomain final : public HostPeakDomain {
 public:
  SamplingDomain(int pid, Fd statm, std::chrono::microseconds interval)
      : pid_(pid), statm_(std::move(statm)), interval_(interval), thread_([this] { run(); }) {}

  ~SamplingDomain() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  std::int64_t open(Windows::Window& w) override {
    std::lock_guard lock(mutex_);
    std::int64_t rss = 0;
    if (!sample(rss)) throw_process_gone(pid_, "statm");
    const bool was_idle = windows_.empty();
    windows_.open(w, {rss});
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

  std::mutex mutex_;
  std::condition_variable wake_;
  Windows windows_;
  const int pid_;
  Fd statm_;
  const std::chrono::microseconds interval_;
  std::int64_t last_rss_ = 0;
  bool gone_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: starts after every member it uses is built
};

}  // namespace

std::shared_ptr<HostPeakDomain> sampling_domain(int pid, std::chrono::microseconds interval) {
  Fd statm = open_proc(pid, "statm", O_RDONLY);
  if (!statm.valid()) {
    char path[64];
    proc_path(pid, "statm", path, sizeof path);
    throw BackendUnavailableError(std::string("memscope: cannot read ") + path);
  }
  const int real_pid = pid == 0 ? static_cast<int>(getpid()) : pid;  // for messages
  return std::make_shared<SamplingDomain>(real_pid, std::move(statm), interval);
}

}  // namespace memscope::detail

// Kernel-mode peak windows: VmHWM plus clear_refs, shared by every probe on one process.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <mutex>

#include "memscope/errors.hpp"
#include "probes/host_peak_domain.hpp"
#include "probes/proc_files.hpp"

namespace memscope::detail {
namespace {

class KernelHwmDomain final : public HostPeakDomain {
 public:
  KernelHwmDomain(int pid, bool self, Fd clear_refs, Fd statm, Fd status)
      : pid_(pid),
        self_(self),
        clear_refs_(std::move(clear_refs)),
        statm_(std::move(statm)),
        status_(std::move(status)) {}

  std::int64_t open(Windows::Window& w) override {
    std::lock_guard lock(mutex_);
    std::int64_t rss = read_rss();
    fold_hwm_into_innermost(rss);
    reset_hwm();
    windows_.open(w, {rss});
    return rss;
  }

  Reading read(const Windows::Window& w) override {
    std::lock_guard lock(mutex_);
    std::int64_t rss = read_rss();
    windows_.observe(0, rss);
    std::int64_t peak = windows_.peak(w)[0];
    if (!max_with_hwm(peak)) throw_process_gone(pid_, "status");
    return {rss, peak};
  }

  Reading close(Windows::Window& w) noexcept override {
    std::lock_guard lock(mutex_);
    std::int64_t rss = 0;
    bool alive = read_statm(statm_.get(), rss);
    if (alive) {
      last_rss_ = rss;
      windows_.observe(0, rss);
    }
    std::int64_t peak = windows_.peak(w)[0];
    if (alive) alive = max_with_hwm(peak);
    // VmHWM is not folded anywhere: it stays in the kernel and still covers only time inside
    // every window that remains open.
    std::int64_t record = windows_.close(w)[0];
    if (!alive) rss = last_rss_;  // the process is gone: keep what was seen until then
    return {rss, std::max(peak, record)};
  }

  void reset_peak() override {
    std::lock_guard lock(mutex_);
    fold_hwm_into_innermost(read_rss());
    reset_hwm();
  }

 private:
  std::int64_t read_rss() {
    std::int64_t rss = 0;
    if (!read_statm(statm_.get(), rss)) throw_process_gone(pid_, "statm");
    last_rss_ = rss;
    return rss;
  }

  // known = max(known, VmHWM now). getrusage's maxrss bounds VmHWM from above at a tenth of the
  // cost of reading status, so status is read only when the bound cannot decide. (Both use the
  // kernel's per-CPU RSS counters, which may lag the exact sum by a few hundred KiB.)
  bool max_with_hwm(std::int64_t& known) noexcept {
    if (self_ && self_maxrss_bound() <= known) return true;
    HostMemory m;
    if (!read_status(status_.get(), m)) return false;
    known = std::max(known, m.hwm);
    return true;
  }

  // Before VmHWM is reset its value must live on in a window, or the windows open now would
  // lose the peak it holds.
  void fold_hwm_into_innermost(std::int64_t rss) {
    Windows::Window* top = windows_.innermost();
    if (top == nullptr) return;
    std::int64_t known = std::max(top->record[0], rss);
    if (!max_with_hwm(known)) throw_process_gone(pid_, "status");
    windows_.observe(0, known);
  }

  void reset_hwm() {
    if (pwrite(clear_refs_.get(), "5", 1, 0) != 1) {
      const std::string error = errno_text(errno);
      throw BackendError("memscope: writing 5 to /proc/" + std::to_string(pid_) +
                         "/clear_refs failed (" + error +
                         "); it worked when the probe was created, so the process has probably "
                         "exited");
    }
  }

  std::mutex mutex_;
  Windows windows_;
  const int pid_;
  const bool self_;
  Fd clear_refs_;
  Fd statm_;
  Fd status_;
  std::int64_t last_rss_ = 0;
};

}  // namespace

std::shared_ptr<HostPeakDomain> kernel_hwm_domain(int pid, std::string& why_not) {
  static std::mutex registry_mutex;
  static std::map<int, std::weak_ptr<HostPeakDomain>> registry;  // by real pid (fork-safe)

  const int real_pid = pid == 0 ? static_cast<int>(getpid()) : pid;
  std::lock_guard lock(registry_mutex);
  std::erase_if(registry, [](const auto& entry) { return entry.second.expired(); });
  if (auto it = registry.find(real_pid); it != registry.end()) {
    if (auto domain = it->second.lock()) return domain;
  }

  char path[64];
  proc_path(pid, "clear_refs", path, sizeof path);
  Fd clear_refs = open_proc(pid, "clear_refs", O_WRONLY);
  // Writing is the only real test: some kernels and sandboxes open the file but refuse writes.
  // No window of this process is open yet, so resetting VmHWM here loses nothing we track.
  if (!clear_refs.valid() || pwrite(clear_refs.get(), "5", 1, 0) != 1) {
    const std::string error = errno_text(errno);
    why_not = std::string("cannot write 5 to ") + path + " (" + error + ")";
    return nullptr;
  }
  Fd statm = open_proc(pid, "statm", O_RDONLY);
  Fd status = open_proc(pid, "status", O_RDONLY);
  if (!statm.valid() || !status.valid()) {
    const std::string error = errno_text(errno);
    why_not = "cannot read /proc/" + std::to_string(real_pid) + " (" + error + ")";
    return nullptr;
  }
  auto domain = std::make_shared<KernelHwmDomain>(
      real_pid, real_pid == getpid(), std::move(clear_refs), std::move(statm), std::move(status));
  registry[real_pid] = domain;
  return domain;
}

void throw_process_gone(int pid, const char* file) {
  const std::string error = errno_text(errno);
  throw BackendError("memscope: cannot read /proc/" + std::to_string(pid) + "/" + file + " (" +
                     error + "); the process has probably exited");
}

}  // namespace memscope::detail

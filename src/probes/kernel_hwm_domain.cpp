// Kernel-mode peak windows: VmHWM plus clear_refs, shared by every probe on one process.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <mutex>

#include "memscope/cascade_peak.hpp"
#include "memscope/errors.hpp"
#include "probes/host_peak_domain.hpp"
#include "probes/proc_files.hpp"

namespace memscope::detail {
namespace {

// The kernel's RSS counter of one process, whose single resettable peak is VmHWM.
class KernelHwmCounter {
 public:
  KernelHwmCounter(int pid, bool self, Fd clear_refs, Fd statm, Fd status)
      : pid_(pid),
        self_(self),
        clear_refs_(std::move(clear_refs)),
        statm_(std::move(statm)),
        status_(std::move(status)) {}

  std::int64_t current() {
    std::int64_t rss = 0;
    if (!read_statm(statm_.get(), rss)) throw_process_gone(pid_, "statm");
    return rss;
  }

  std::int64_t peak() {
    HostMemory m;
    if (!read_status(status_.get(), m)) throw_process_gone(pid_, "status");
    return m.hwm;
  }

  // getrusage's maxrss bounds VmHWM from above at a tenth of the cost of reading status, so
  // status is read only when the bound cannot decide. (Both use the kernel's per-CPU RSS
  // counters, which may lag the exact sum by a few hundred KiB.)
  std::int64_t peak_at_least(std::int64_t known) {
    if (self_ && self_maxrss_bound() <= known) return known;
    return std::max(known, peak());
  }

  void reset_peak() {
    if (pwrite(clear_refs_.get(), "5", 1, 0) != 1) {
      const std::string error = errno_text(errno);
      throw BackendError("memscope: writing 5 to /proc/" + std::to_string(pid_) +
                         "/clear_refs failed (" + error +
                         "); it worked when the probe was created, so the process has probably "
                         "exited");
    }
  }

 private:
  int pid_;
  bool self_;
  Fd clear_refs_;
  Fd statm_;
  Fd status_;
};

// The cascade rule over VmHWM (CascadePeak), behind one lock per process.
class KernelHwmDomain final : public HostPeakDomain {
 public:
  explicit KernelHwmDomain(KernelHwmCounter counter) : cascade_(std::move(counter)) {}

  std::int64_t open(Windows::Window& w) override {
    std::lock_guard lock(mutex_);
    return cascade_.open(w);
  }

  Reading read(const Windows::Window& w) override {
    std::lock_guard lock(mutex_);
    const auto r = cascade_.read(w);
    return {r.current, r.peak};
  }

  // When the process is gone, the last RSS read and the peak seen until then.
  Reading close(Windows::Window& w) noexcept override {
    std::lock_guard lock(mutex_);
    const auto r = cascade_.close(w);
    return {r.current, r.peak};
  }

  void reset_peak() override {
    std::lock_guard lock(mutex_);
    cascade_.reset_peak();
  }

 private:
  std::mutex mutex_;
  CascadePeak<KernelHwmCounter> cascade_;
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
  auto domain = std::make_shared<KernelHwmDomain>(KernelHwmCounter(
      real_pid, real_pid == getpid(), std::move(clear_refs), std::move(statm), std::move(status)));
  registry[real_pid] = domain;
  return domain;
}

void throw_process_gone(int pid, const char* file) {
  const std::string error = errno_text(errno);
  throw BackendError("memscope: cannot read /proc/" + std::to_string(pid) + "/" + file + " (" +
                     error + "); the process has probably exited");
}

}  // namespace memscope::detail

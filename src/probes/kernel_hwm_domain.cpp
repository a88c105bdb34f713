// Kernel-mode peak windows: VmHWM plus clear_refs, shared by every probe on one process.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <mutex>

#include "memscope/cascade_peak.hpp"
#include "memscope/errors.hpp"
#include "probes/fork_guard.hpp"
#include "probes/host_peak_domain.hpp"
#include "probes/proc_files.hpp"
#include "probes/self_peak.hpp"

namespace memscope::detail {
namespace {

// The kernel's RSS counter of one process, whose single resettable peak is VmHWM.
//
// Since Linux 6.2 the kernel keeps RSS in per-CPU counters and VmHWM is taken from their
// approximate sum, so it may miss the exact peak by up to rss_counter_slack(); status's VmRSS
// is exact on recent kernels, so every status read folds it in too (peak()).
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
    const std::int64_t peak = std::max(m.hwm, m.rss);
    if (self_) note_self_peak(peak);
    return peak;
  }

  // getrusage's maxrss bounds the kernel's mark from above at a tenth of the cost of reading
  // status, so status is read only when the bound cannot decide. (Both come from the per-CPU
  // counters' approximate sum; see rss_counter_slack.)
  std::int64_t peak_at_least(std::int64_t known) {
    if (self_ && self_maxrss_bound() <= known) return known;
    return std::max(known, peak());
  }

  void reset_peak() {
    // What clear_refs is about to erase goes to the process-lifetime peak first, so that
    // process_peak_rss() still knows it (/usr/bin/time and Slurm read ru_maxrss, which drops).
    if (self_) note_self_peak(self_high_water_mark());
    if (pwrite(clear_refs_.get(), "5", 1, 0) != 1) {
      const std::string error = errno_text(errno);
      throw BackendError("memscope: writing 5 to /proc/" + std::to_string(pid_) +
                         "/clear_refs failed (" + error +
                         "); it worked when the probe was created, so the process has probably "
                         "exited");
    }
  }

  [[nodiscard]] bool self() const noexcept { return self_; }

  // In a forked child: the files named /proc/self now name the child.
  void follow_into_child() noexcept {
    if (!self_) return;
    pid_ = static_cast<int>(getpid());
    reopen_self_proc(clear_refs_.get(), "clear_refs", O_WRONLY);
    reopen_self_proc(statm_.get(), "statm", O_RDONLY);
    reopen_self_proc(status_.get(), "status", O_RDONLY);
  }

 private:
  int pid_;
  bool self_;
  Fd clear_refs_;
  Fd statm_;
  Fd status_;
};

// The cascade rule over VmHWM (CascadePeak), behind one lock per process.
class KernelHwmDomain final : public HostPeakDomain, private ForkHooks {
 public:
  explicit KernelHwmDomain(KernelHwmCounter counter) : cascade_(std::move(counter)) {
    add_fork_hooks(ForkLevel::domain, *this);
  }
  ~KernelHwmDomain() override { remove_fork_hooks(ForkLevel::domain, *this); }
  KernelHwmDomain(const KernelHwmDomain&) = delete;
  KernelHwmDomain& operator=(const KernelHwmDomain&) = delete;

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

  [[nodiscard]] bool self() noexcept { return cascade_.counter().self(); }

 private:
  void before_fork() noexcept override {
    mutex_.lock();  // NOLINT(bugprone-unhandled-exception-at-new): std::mutex::lock
    // The child's VmHWM starts afresh: the parent's must live on in the windows it inherits.
    if (cascade_.counter().self()) {
      try {
        cascade_.fold_peak();
      } catch (...) {  // NOLINT(bugprone-empty-catch): the process is gone; nothing to keep
      }
    }
  }
  void after_fork_parent() noexcept override { mutex_.unlock(); }
  void after_fork_child() noexcept override {
    cascade_.counter().follow_into_child();
    mutex_.unlock();
  }

  std::mutex mutex_;
  CascadePeak<KernelHwmCounter> cascade_;
};

// One domain per process, by real pid. Its lock sits between the trackers' and the domains' in
// the lock order; around fork it is held, and in the child this process's domain moves to the
// child's pid (it follows the process; a domain for any other pid keeps watching that pid).
class Registry final : private ForkHooks {
 public:
  Registry() { add_fork_hooks(ForkLevel::domain_registry, *this); }
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  ~Registry() override { remove_fork_hooks(ForkLevel::domain_registry, *this); }

  std::mutex mutex;
  std::map<int, std::weak_ptr<KernelHwmDomain>> domains;

 private:
  void before_fork() noexcept override {
    mutex.lock();  // NOLINT(bugprone-unhandled-exception-at-new): std::mutex::lock
    pid_before_fork_ = static_cast<int>(getpid());
  }
  void after_fork_parent() noexcept override { mutex.unlock(); }
  void after_fork_child() noexcept override {
    // No allocation: the node moves to its new key.
    auto node = domains.extract(pid_before_fork_);
    if (!node.empty()) {
      const auto domain = node.mapped().lock();
      if (domain != nullptr && domain->self()) {
        node.key() = static_cast<int>(getpid());
        domains.insert(std::move(node));
      }
    }
    mutex.unlock();
  }

  int pid_before_fork_ = 0;
};

Registry& registry() {
  static auto* const r = new Registry();  // NOLINT(cppcoreguidelines-owning-memory): never freed
  return *r;
}

}  // namespace

std::shared_ptr<HostPeakDomain> kernel_hwm_domain(int pid, std::string& why_not) {
  Registry& reg = registry();
  const int real_pid = pid == 0 ? static_cast<int>(getpid()) : pid;
  // A probe on this process, however it named it, follows it into a forked child.
  const bool self = real_pid == getpid();
  const int open_pid = self ? 0 : pid;
  std::lock_guard lock(reg.mutex);
  std::erase_if(reg.domains, [](const auto& entry) { return entry.second.expired(); });
  if (auto it = reg.domains.find(real_pid); it != reg.domains.end()) {
    if (auto domain = it->second.lock()) return domain;
  }

  char path[64];
  proc_path(open_pid, "clear_refs", path, sizeof path);
  Fd clear_refs = open_proc(open_pid, "clear_refs", O_WRONLY);
  // Writing is the only real test: some kernels and sandboxes open the file but refuse writes.
  // No window of this process is open yet, so resetting VmHWM here loses nothing we track; the
  // process-lifetime peak keeps what it held.
  if (self) note_self_peak(self_high_water_mark());
  if (!clear_refs.valid() || pwrite(clear_refs.get(), "5", 1, 0) != 1) {
    const std::string error = errno_text(errno);
    why_not = std::string("cannot write 5 to ") + path + " (" + error + ")";
    return nullptr;
  }
  Fd statm = open_proc(open_pid, "statm", O_RDONLY);
  Fd status = open_proc(open_pid, "status", O_RDONLY);
  if (!statm.valid() || !status.valid()) {
    const std::string error = errno_text(errno);
    why_not = "cannot read /proc/" + std::to_string(real_pid) + " (" + error + ")";
    return nullptr;
  }
  auto domain = std::make_shared<KernelHwmDomain>(
      KernelHwmCounter(real_pid, self, std::move(clear_refs), std::move(statm), std::move(status)));
  reg.domains[real_pid] = domain;
  return domain;
}

}  // namespace memscope::detail

// The process-lifetime peak RSS memscope has seen of this process (self_peak.hpp).
#include "probes/self_peak.hpp"

#include <atomic>

#include "probes/fork_guard.hpp"

namespace memscope::detail {
namespace {

// The process-lifetime peak noted so far; a forked child starts from zero (its ru_maxrss does).
class SelfPeak final : private ForkHooks {
 public:
  SelfPeak() { add_fork_hooks(ForkLevel::probe, *this); }
  SelfPeak(const SelfPeak&) = delete;
  SelfPeak& operator=(const SelfPeak&) = delete;
  ~SelfPeak() override { remove_fork_hooks(ForkLevel::probe, *this); }

  void note(std::int64_t bytes) noexcept {
    std::int64_t seen = peak_.load(std::memory_order_relaxed);
    while (bytes > seen && !peak_.compare_exchange_weak(seen, bytes, std::memory_order_relaxed)) {
    }
  }
  [[nodiscard]] std::int64_t get() const noexcept { return peak_.load(std::memory_order_relaxed); }

 private:
  void before_fork() noexcept override {}
  void after_fork_parent() noexcept override {}
  void after_fork_child() noexcept override { peak_.store(0, std::memory_order_relaxed); }

  std::atomic<std::int64_t> peak_{0};
};

SelfPeak& self_peak() {
  static auto* const peak = new SelfPeak();  // NOLINT(cppcoreguidelines-owning-memory): never freed
  return *peak;
}

}  // namespace

void note_self_peak(std::int64_t bytes) noexcept {
  self_peak().note(bytes);
}

std::int64_t self_peak_seen() {
  return self_peak().get();
}

}  // namespace memscope::detail

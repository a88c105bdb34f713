// The state behind MemoryTracker, shared by tracker.cpp (stages) and tracker_report.cpp
// (metrics). Everything is guarded by `mutex`, which is held around fork() (the fork hooks) so a
// child forked while another thread is inside the tracker finds it unlocked and consistent.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "memscope/trace_tag.hpp"
#include "memscope/tracker.hpp"
#include "probes/fork_guard.hpp"

namespace memscope {

struct MemoryTracker::Impl final : detail::ForkHooks {
  using Clock = std::chrono::steady_clock;

  struct Slot {  // one source and the labels its metrics use
    std::shared_ptr<MemorySource> source;
    std::vector<std::string> labels;  // {"gpu"}, or {"gpu", "gpu0"} for the first of several
    bool available = false;
    std::string mode;
  };
  struct Values {
    std::int64_t begin = 0;
    std::int64_t end = 0;
    std::int64_t peak = 0;
    std::int64_t bound = 0;  // the source's peak_bound() when the stage ended
  };
  struct Running {
    Clock::time_point started;
    std::vector<std::unique_ptr<MemorySource::Window>>
        windows;  // one per slot; null if unavailable
    // The stage is the starting thread's trace tag (trace_tag.hpp) while it runs, so recorded
    // allocator events carry it; `outer` is the tag it replaced, restored when it stops.
    TraceTag tag = nullptr;
    TraceTag outer = nullptr;
  };
  struct Finished {
    double runtime_s = 0;
    std::vector<Values> values;  // one per slot; unused for unavailable slots
  };

  mutable std::mutex mutex;
  std::vector<Slot> slots;
  std::map<std::string, Running, std::less<>> running;
  std::map<std::string, Finished, std::less<>> finished;
  bool implicit_init_running = false;
  bool init_reported = false;
  bool absolute_values = false;
  bool report_modes = false;

  void before_fork() noexcept override {
    mutex.lock();  // NOLINT(bugprone-unhandled-exception-at-new): std::mutex::lock
  }
  void after_fork_parent() noexcept override { mutex.unlock(); }
  void after_fork_child() noexcept override { mutex.unlock(); }

  // Opens a window on every available source. Throws what a source throws; windows already
  // opened close as the vector unwinds.
  [[nodiscard]] Running open_stage() const;
  // Starts `name`: opens its windows and makes it the calling thread's trace tag.
  void begin_stage(std::string_view name);
  // Closes every window of `it` and moves the result to `finished`.
  void finish(std::map<std::string, Running, std::less<>>::iterator it);
  // Appends init's metrics and before_init_mem_* if init has finished; false if it has not.
  bool add_init_metrics(Metrics& out) const;
  // Appends the metrics of a finished stage (name must be in `finished`).
  void add_stage_metrics(const std::string& name, const Finished& stage, Metrics& out) const;
};

}  // namespace memscope

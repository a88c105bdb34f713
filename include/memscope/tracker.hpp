// MemoryTracker: per-stage CPU and GPU memory metrics with the Hugging Face Trainer's names,
// for nested and overlapping stages: exact for allocator sources, within the kernel's stated RSS
// slack for the host ({stage}_mem_cpu_peak_bound; docs/tracker.md).
//
//   memscope::MemoryTracker tracker({.sources = {memscope::make_host_source(),
//                                                memscope::make_allocator_source(gpu0)}});
//   { auto train = tracker.stage("train");
//     { auto eval = tracker.stage("eval"); ... }   // eval inside train: both exact
//   }
//   memscope::Metrics m;
//   tracker.update_metrics("train", m);   // train_mem_cpu_alloc_delta, ... (+ init_* once)
//   memscope::log_metrics("train", m);
//
// Each stage opens one window on every available source. For each source it reports, in
// bytes, {stage}_mem_{label}_alloc_delta = end - begin (may be negative) and
// {stage}_mem_{label}_peaked_delta = max(0, peak - end), where label is "cpu" or "gpu" when
// there is one source of that kind, and "cpu"/"gpu" (the first) plus "gpu0", "gpu1", ... when
// there are several; optionally _begin, _end and _peak; {stage}_runtime in seconds. Every value
// is a number, so the metrics go to dashboards as they are. An unavailable source contributes
// no numbers. How each source measures ("kernel-hwm", "sampling 1ms", "unavailable: <reason>")
// and how many bytes a source that is not exact (the host) may be off are notes(), once per
// source, which log_metrics prints under the table (its `notes` argument).
// TrackerOptions::report_modes puts them in every stage's metrics as well, as before:
// {stage}_mem_{label}_mode (text) and {stage}_mem_{label}_peak_bound (bytes).
//
// "init" is the memory spent from the tracker's construction to the first start() (or an
// "init" stage the caller runs); its metrics and before_init_mem_{label} (the value at
// construction) are added by the first update_metrics() call, as the Trainer does.
//
// While a stage runs, its name is the starting thread's trace tag (trace_tag.hpp), so events an
// allocator records carry it; stopping it restores the tag it replaced (stages nest; a stage
// stopped out of order or on another thread leaves the current tag alone).
//
// Skipping (TrackerOptions::skip_memory_metrics, or MEMSCOPE_SKIP_MEMORY_METRICS=1) makes
// every call return at once: no sources are opened and no metrics are produced.
//
// Thread safety: every method may be called from any thread (one mutex, held around fork() so
// a child forked while another thread is inside the tracker can use it). Ownership: the
// tracker shares its sources; Stage handles must not outlive their tracker.
// Errors: UsageError for a bad stage name, starting a running stage, stopping or reporting a
// stage that is not running / has not run; ConfigError for a bad MEMSCOPE_SKIP_MEMORY_METRICS;
// errors from a source's open_window() pass through start(). Destructors never throw.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "memscope/memory_source.hpp"
#include "memscope/metrics.hpp"

namespace memscope {

struct TrackerOptions {
  // Empty: the host probe of this process (make_host_source()).
  std::vector<std::shared_ptr<MemorySource>> sources;
  bool skip_memory_metrics = false;  // MEMSCOPE_SKIP_MEMORY_METRICS=1 also sets it
  bool absolute_values = false;      // add {stage}_mem_{label}_begin, _end and _peak
  bool report_modes = false;  // add {stage}_mem_{label}_mode (text) and _peak_bound per stage
  bool implicit_init = true;  // an "init" stage from construction to the first start()
};

class MemoryTracker {
 public:
  explicit MemoryTracker(TrackerOptions options = {});
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;
  ~MemoryTracker() noexcept;

  // Stage names: a letter, then letters, digits, '-' or '.'; at most 64 characters. ('_' is
  // refused because it would make metric names such as a_b_mem_cpu_alloc_delta ambiguous.)
  void start(std::string_view stage);
  void stop(std::string_view stage);

  class Stage;
  // start(name) now, stop(name) when the handle is destroyed or stopped.
  [[nodiscard]] Stage stage(std::string_view name);

  // The metrics of the last finished run of `stage` (without init_*).
  [[nodiscard]] Metrics metrics(std::string_view stage) const;
  // Adds metrics(stage) to `metrics`, and the first time also init_metrics(): the one place
  // of the rule that init is reported once, with whichever stage reports first.
  void update_metrics(std::string_view stage, Metrics& metrics);
  // init_* and before_init_mem_* once "init" has finished; empty before (and when skipping).
  [[nodiscard]] Metrics init_metrics() const;

  [[nodiscard]] bool enabled() const noexcept { return impl_ != nullptr; }

  struct SourceInfo {
    std::string label;  // "cpu", "gpu", "gpu1", ...: the {label} in metric names
    std::string name;
    SourceKind kind = SourceKind::cpu;
    bool available = false;
    std::string mode;  // how it measures, or "unavailable: <reason>"
  };
  [[nodiscard]] std::vector<SourceInfo> sources() const;
  // How each source measures, once: label -> "host rss (pid 42), kernel-hwm, peaks within
  // 744.00 KiB" / "cuda unavailable: no CUDA driver" (for log_metrics' `notes`).
  [[nodiscard]] MetricNotes notes() const;
  // One line: "cpu: host rss (pid 42), kernel-hwm; gpu: unavailable: no CUDA driver".
  [[nodiscard]] std::string describe_sources() const;
  [[nodiscard]] std::vector<std::string> running_stages() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;  // null when skipping
};

// MEMSCOPE_SKIP_MEMORY_METRICS as the switch MemoryTracker reads: unset, empty, 0, false, no or
// off (any case) is false; 1, true, yes or on is true; anything else throws ConfigError naming
// the variable, the value and the allowed values.
[[nodiscard]] bool skip_memory_metrics_from_env();

// RAII handle for a running stage. Movable, not copyable.
class MemoryTracker::Stage {
 public:
  Stage(Stage&& other) noexcept;
  Stage& operator=(Stage&& other) noexcept;
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;
  ~Stage() noexcept;  // stops the stage if still running; errors are swallowed

  // Stops the stage now (UsageError if it was already stopped through the tracker).
  void stop();
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  friend class MemoryTracker;
  Stage(MemoryTracker* tracker, std::string_view name) : tracker_(tracker), name_(name) {}

  MemoryTracker* tracker_ = nullptr;  // null once stopped, moved from, or skipping
  std::string name_;
};

}  // namespace memscope

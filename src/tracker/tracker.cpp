// MemoryTracker: stages by name, each with one window per source.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <utility>

#include "common/env_switch.hpp"
#include "memscope/errors.hpp"
#include "memscope/stage_marks.hpp"
#include "tracker/tracker_impl.hpp"

namespace memscope {
namespace {

constexpr std::size_t kMaxStageName = 64;

bool valid_stage_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxStageName) return false;
  if (std::isalpha(static_cast<unsigned char>(name[0])) == 0) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '.';
  });
}

void check_stage_name(std::string_view name) {
  if (valid_stage_name(name)) return;
  throw UsageError("memscope: stage name '" + std::string(name) +
                   "' is not allowed: use a letter, then letters, digits, '-' or '.', at most " +
                   std::to_string(kMaxStageName) +
                   " characters (the name becomes part of metric names such as "
                   "train_mem_cpu_alloc_delta, where '_' would be ambiguous)");
}

// Labels: "cpu"/"gpu" alone when a kind has one source; with several, the first is also the
// plain label (as the Trainer's single "gpu" was the first device) and each gets its index.
void assign_labels(std::vector<MemoryTracker::Impl::Slot>& slots) {
  for (SourceKind kind : {SourceKind::cpu, SourceKind::gpu}) {
    const std::string base = kind == SourceKind::cpu ? "cpu" : "gpu";
    const auto count = std::count_if(slots.begin(), slots.end(),
                                     [&](const auto& s) { return s.source->kind() == kind; });
    std::size_t index = 0;
    for (auto& s : slots) {
      if (s.source->kind() != kind) continue;
      if (count == 1) {
        s.labels = {base};
      } else if (index == 0) {
        s.labels = {base, base + "0"};
      } else {
        s.labels = {base + std::to_string(index)};
      }
      ++index;
    }
  }
}

}  // namespace

// MEMSCOPE_SKIP_MEMORY_METRICS: the Trainer's skip_memory_metrics as an environment switch.
bool skip_memory_metrics_from_env() {
  return detail::read_env_switch({.name = "MEMSCOPE_SKIP_MEMORY_METRICS",
                                  .off = {"", "0", "false", "no", "off"},
                                  .on = {"1", "true", "yes", "on"},
                                  .is_not = "a switch",
                                  .use = "1, true, yes or on to skip memory metrics, or 0, false, "
                                         "no, off or nothing to keep them"});
}

MemoryTracker::Impl::Running MemoryTracker::Impl::open_stage() const {
  Running r;
  r.windows.reserve(slots.size());
  for (const Slot& s : slots) r.windows.push_back(s.available ? s.source->open_window() : nullptr);
  r.started = Clock::now();
  return r;
}

void MemoryTracker::Impl::begin_stage(std::string_view name) {
  // The mark first: it carries the process's peak RSS, read before the windows reset VmHWM.
  write_stage_mark("begin", name);
  Running r;
  try {
    r = open_stage();
  } catch (...) {
    write_stage_mark("end", name);  // the stage never ran: close it on `memscope run`'s timeline
    throw;
  }
  r.tag = intern_trace_tag(name);
  auto it = running.emplace(std::string(name), std::move(r)).first;
  it->second.outer = exchange_trace_tag(it->second.tag);
}

void MemoryTracker::Impl::finish(std::map<std::string, Running, std::less<>>::iterator it) {
  const Clock::time_point stopped = Clock::now();
  // Nested stages restore the outer one's tag. A stage stopped out of order, or on another
  // thread, leaves the current tag alone (it names a stage that still runs, or another thread's).
  if (current_trace_tag() == it->second.tag) exchange_trace_tag(it->second.outer);
  Finished f;
  f.runtime_s = std::chrono::duration<double>(stopped - it->second.started).count();
  f.values.resize(slots.size());
  for (std::size_t i = 0; i < slots.size(); ++i) {
    auto& window = it->second.windows[i];
    if (window == nullptr) continue;
    const std::int64_t begin = window->begin();
    const MemorySource::Reading r = window->close();
    std::int64_t bound = 0;
    try {
      bound = slots[i].source->peak_bound();
    } catch (...) {  // NOLINT(bugprone-empty-catch): a source that cannot say reports none
    }
    f.values[i] = {begin, r.current, std::max({r.peak, r.current, begin}), bound};
  }
  if (stage_marks_enabled()) {
    // The stage's exact figures, under the labels its metrics use (cpu_alloc_delta, ...).
    std::map<std::string, std::int64_t> figures;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (it->second.windows[i] == nullptr) continue;
      const Values& v = f.values[i];
      for (const std::string& label : slots[i].labels) {
        figures[label + "_alloc_delta"] = v.end - v.begin;
        figures[label + "_peaked_delta"] = std::max<std::int64_t>(0, v.peak - v.end);
      }
    }
    write_stage_mark("end", it->first, figures);
  }
  finished.insert_or_assign(it->first, std::move(f));  // a rerun replaces the earlier result
  running.erase(it);
}

MemoryTracker::MemoryTracker(TrackerOptions options) {
  if (options.skip_memory_metrics || skip_memory_metrics_from_env())
    return;  // impl_ stays null: free
  impl_ = std::make_unique<Impl>();
  impl_->absolute_values = options.absolute_values;
  impl_->report_modes = options.report_modes;
  if (options.sources.empty()) options.sources.push_back(make_host_source());
  for (auto& source : options.sources) {
    if (source == nullptr)
      throw UsageError("memscope: TrackerOptions::sources holds a null source");
    Impl::Slot slot;
    slot.available = source->available();
    slot.mode = slot.available ? source->mode() : "unavailable: " + source->reason();
    slot.source = std::move(source);
    impl_->slots.push_back(std::move(slot));
  }
  assign_labels(impl_->slots);
  if (options.implicit_init) {
    impl_->begin_stage("init");
    impl_->implicit_init_running = true;
  }
  detail::add_fork_hooks(detail::ForkLevel::tracker, *impl_);  // last: nothing throws after it
}

MemoryTracker::~MemoryTracker() noexcept {
  if (!impl_) return;
  detail::remove_fork_hooks(detail::ForkLevel::tracker, *impl_);
  // Stages still running end with the tracker: hand back the tags they replaced, innermost first.
  // (At most one round per stage: two trackers may run stages of the same name.)
  for (std::size_t round = 0; round < impl_->running.size(); ++round) {
    bool restored = false;
    for (const auto& [name, stage] : impl_->running) {
      if (stage.tag != nullptr && current_trace_tag() == stage.tag) {
        exchange_trace_tag(stage.outer);
        restored = true;
        break;
      }
    }
    if (!restored) break;
  }
  // Stages still running end with the tracker, also on `memscope run`'s timeline.
  for (const auto& [name, stage] : impl_->running) write_stage_mark("end", name);
  // open windows close as impl_ is destroyed
}

void MemoryTracker::start(std::string_view stage) {
  if (!impl_) return;
  check_stage_name(stage);
  std::lock_guard lock(impl_->mutex);
  if (impl_->implicit_init_running) {
    // The first stage ends the implicit init, unless the caller runs "init" itself, which then
    // replaces it.
    auto it = impl_->running.find("init");
    if (stage == "init") {
      if (current_trace_tag() == it->second.tag) exchange_trace_tag(it->second.outer);
      write_stage_mark("end", "init");  // the implicit one; the caller's begins now
      impl_->running.erase(it);
    } else {
      impl_->finish(it);
    }
    impl_->implicit_init_running = false;
  }
  if (impl_->running.contains(stage)) {
    throw UsageError("memscope: stage '" + std::string(stage) +
                     "' is already running; stop it before starting it again");
  }
  impl_->begin_stage(stage);
}

void MemoryTracker::stop(std::string_view stage) {
  if (!impl_) return;
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->running.find(stage);
  if (it == impl_->running.end()) {
    check_stage_name(stage);
    throw UsageError(
        "memscope: cannot stop stage '" + std::string(stage) + "': it " +
        (impl_->finished.contains(stage) ? "was already stopped" : "was never started"));
  }
  if (stage == "init") impl_->implicit_init_running = false;
  impl_->finish(it);
}

MemoryTracker::Stage MemoryTracker::stage(std::string_view name) {
  start(name);
  return Stage(impl_ ? this : nullptr, name);
}

std::vector<std::string> MemoryTracker::running_stages() const {
  std::vector<std::string> names;
  if (!impl_) return names;
  std::lock_guard lock(impl_->mutex);
  for (const auto& [name, running] : impl_->running) names.push_back(name);
  return names;
}

MemoryTracker::Stage::Stage(Stage&& other) noexcept
    : tracker_(std::exchange(other.tracker_, nullptr)), name_(std::move(other.name_)) {}

MemoryTracker::Stage& MemoryTracker::Stage::operator=(Stage&& other) noexcept {
  if (this != &other) {
    try {
      if (tracker_ != nullptr) tracker_->stop(name_);
    } catch (...) {  // NOLINT(bugprone-empty-catch): already stopped through the tracker
    }
    tracker_ = std::exchange(other.tracker_, nullptr);
    name_ = std::move(other.name_);
  }
  return *this;
}

MemoryTracker::Stage::~Stage() noexcept {
  try {
    stop();
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw
  }
}

void MemoryTracker::Stage::stop() {
  if (tracker_ == nullptr) return;
  MemoryTracker* tracker = std::exchange(tracker_, nullptr);
  tracker->stop(name_);
}

}  // namespace memscope

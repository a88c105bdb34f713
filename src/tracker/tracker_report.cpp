// MemoryTracker's reporting side: finished stages as Trainer-named metrics.
#include <algorithm>
#include <cmath>

#include "memscope/errors.hpp"
#include "memscope/units.hpp"
#include "tracker/tracker_impl.hpp"

namespace memscope {
void MemoryTracker::Impl::add_stage_metrics(const std::string& name, const Finished& stage,
                                            Metrics& out) const {
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const Slot& slot = slots[i];
    for (const std::string& label : slot.labels) {
      std::string prefix = name;
      prefix.append("_mem_").append(label).append("_");
      if (report_modes) out.insert_or_assign(prefix + "mode", slot.mode);
      if (!slot.available) continue;
      const Values& v = stage.values[i];
      out.insert_or_assign(prefix + "alloc_delta", v.end - v.begin);
      out.insert_or_assign(prefix + "peaked_delta", std::max<std::int64_t>(0, v.peak - v.end));
      // How far the numbers may be from exact (the host's approximate RSS counters), with the
      // mode, since it says how they were measured.
      if (report_modes && v.bound > 0) out.insert_or_assign(prefix + "peak_bound", v.bound);
      if (absolute_values) {
        out.insert_or_assign(prefix + "begin", v.begin);
        out.insert_or_assign(prefix + "end", v.end);
        out.insert_or_assign(prefix + "peak", v.peak);
      }
    }
  }
  // Rounded to 0.1 ms as the Trainer's speed metrics are.
  out.insert_or_assign(name + "_runtime", std::round(stage.runtime_s * 1e4) / 1e4);
}

// The baseline at construction (before_init_mem_*) is init's begin value.
bool MemoryTracker::Impl::add_init_metrics(Metrics& out) const {
  auto init = finished.find("init");
  if (init == finished.end()) return false;
  add_stage_metrics(init->first, init->second, out);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i].available) continue;
    for (const std::string& label : slots[i].labels) {
      out.insert_or_assign("before_init_mem_" + label, init->second.values[i].begin);
    }
  }
  return true;
}

Metrics MemoryTracker::init_metrics() const {
  Metrics out;
  if (!impl_) return out;
  std::lock_guard lock(impl_->mutex);
  impl_->add_init_metrics(out);
  return out;
}

Metrics MemoryTracker::metrics(std::string_view stage) const {
  Metrics out;
  if (!impl_) return out;
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->finished.find(stage);
  if (it == impl_->finished.end()) {
    throw UsageError(
        "memscope: stage '" + std::string(stage) + "' has no metrics: it " +
        (impl_->running.contains(stage) ? "is still running; stop it first" : "never ran"));
  }
  impl_->add_stage_metrics(it->first, it->second, out);
  return out;
}

void MemoryTracker::update_metrics(std::string_view stage, Metrics& metrics) {
  if (!impl_) return;
  Metrics stage_metrics = this->metrics(stage);  // throws before anything is added
  std::lock_guard lock(impl_->mutex);
  // Init is reported once, with whichever stage reports first, as the Trainer does.
  if (!impl_->init_reported) impl_->init_reported = impl_->add_init_metrics(metrics);
  for (auto& [key, value] : stage_metrics) metrics.insert_or_assign(key, std::move(value));
}

std::vector<MemoryTracker::SourceInfo> MemoryTracker::sources() const {
  std::vector<SourceInfo> out;
  if (!impl_) return out;
  std::lock_guard lock(impl_->mutex);
  for (const Impl::Slot& s : impl_->slots) {
    // The indexed label where there is one ("gpu0"); the first of several also reports as "gpu".
    out.push_back({s.labels.back(), s.source->name(), s.source->kind(), s.available, s.mode});
  }
  return out;
}

MetricNotes MemoryTracker::notes() const {
  MetricNotes out;
  if (!impl_) return out;
  std::lock_guard lock(impl_->mutex);
  for (const Impl::Slot& s : impl_->slots) {
    std::string note =
        s.available ? s.source->name() + ", " + s.mode : s.source->name() + " " + s.mode;
    // The bound is the source's, not a stage's: the host's RSS slack depends on the CPUs.
    if (const std::int64_t bound = s.available ? s.source->peak_bound() : 0; bound > 0) {
      note += ", peaks within " + format_bytes(bound);
    }
    out.insert_or_assign(s.labels.back(), std::move(note));
  }
  return out;
}

std::string MemoryTracker::describe_sources() const {
  if (!impl_) return "memory metrics skipped";
  std::string text;
  for (const SourceInfo& s : sources()) {
    if (!text.empty()) text += "; ";
    text += s.label + ": ";
    text += s.available ? s.name + ", " + s.mode : s.name + " " + s.mode;
  }
  return text.empty() ? std::string("no memory sources") : text;
}

}  // namespace memscope

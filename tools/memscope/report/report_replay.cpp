// The report of a replay (report_builders.hpp): the allocator's counters over the trace's
// time, the peak, stage bands from the events' tags, the segments at the peak and the code that
// allocated what was live there.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "memscope/caching_allocator.hpp"
#include "memscope/replay.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"
#include "report/report_builders.hpp"

namespace memscope::cli {

namespace {

// More bands than this would hide the lines under stripes; tags that change every few events
// are better read from the sites table.
constexpr std::size_t kMaxBands = 200;

// Times of the device's events in seconds since its first, or the event's index when the
// trace has no clock (every time the same).
struct Clock {
  const std::vector<TraceEvent>* events = nullptr;
  std::int64_t start_us = 0;
  bool has_time = false;

  [[nodiscard]] double at(std::uint32_t event) const {
    if (events == nullptr || events->empty()) return 0.0;
    const std::size_t i =
        event == kBeforeTrace ? 0 : std::min<std::size_t>(event, events->size() - 1);
    if (!has_time) return static_cast<double>(i);
    return static_cast<double>((*events)[i].time_us - start_us) / 1e6;
  }
};

Clock clock_of(const TorchSnapshot& snapshot, std::int64_t device) {
  Clock c;
  const auto d = static_cast<std::size_t>(device);
  if (device < 0 || d >= snapshot.device_traces.size()) return c;
  c.events = &snapshot.device_traces[d];
  if (c.events->empty()) return c;
  std::int64_t lo = c.events->front().time_us;
  std::int64_t hi = lo;
  for (const TraceEvent& e : *c.events) {
    lo = std::min(lo, e.time_us);
    hi = std::max(hi, e.time_us);
  }
  c.start_us = c.events->front().time_us;
  c.has_time = hi > lo;
  return c;
}

std::string percent_ratio(double ratio) {
  return fmt::format("{:.3f}", ratio);
}

// The code to blame for an op's stack, as the sites tables name it (blamed_frame()).
std::string where_of(const TorchSnapshot& snapshot, const ReplayOp& op, std::size_t index,
                     const ReplayPlan& plan,
                     std::unordered_map<StackId, const TraceFrame*>& cache) {
  auto it = cache.find(op.stack);
  if (it == cache.end())
    it = cache.emplace(op.stack, blamed_frame(snapshot.strings, op.stack)).first;
  ReplaySite site;
  if (it->second != nullptr) site.frame = *it->second;
  site.origin = origin_of(plan, index);
  return site.where();
}

// "event 1,402 at 0.138 s", or the starting live set: the numbering of the text report.
std::string moment_label(const ReplayMoment& m, const Clock& clock) {
  if (m.event == kBeforeTrace) return "the starting live set";
  std::string out = "event " + format_count(m.event);
  if (clock.has_time) out += fmt::format(" at {:.3f} s", clock.at(m.event));
  if (!m.tag.empty()) out += ", stage " + m.tag;
  return out;
}

// "12.97 GiB at event 1,402 at 0.138 s": a peak and when it was reached.
std::string at_moment(const std::string& value, const ReplayMoment& m, const Clock& clock) {
  return m.happened() ? value + " (" + moment_label(m, clock) + ")" : value;
}

// One table of what was live at a moment, by site.
report::Table sites_table(const std::string& title, const ReplayMoment& m,
                          const LiveBreakdown& live, const Clock& clock) {
  report::Table sites{
      title + " (" + moment_label(m, clock) + "), by site",
      {"where", "bytes", "count"},
      {false, true, true},
      {},
      fmt::format("{} live in {} allocations; each stack is blamed on its innermost "
                  "frame of user code (docs/traces.md)",
                  format_size(live.bytes), format_count(live.count))};
  for (const ReplaySite& s : live.top_sites) {
    sites.rows.push_back({s.where(), format_size(s.bytes), format_count(s.count)});
  }
  return sites;
}

void add_bands(const TorchSnapshot& snapshot, const Clock& clock, report::Report& report) {
  if (clock.events == nullptr) return;
  const std::vector<TraceEvent>& events = *clock.events;
  std::size_t i = 0;
  std::size_t dropped = 0;
  while (i < events.size()) {
    const TagId tag = events[i].tag;
    std::size_t j = i;
    while (j + 1 < events.size() && events[j + 1].tag == tag) ++j;
    if (tag != 0 && tag < snapshot.strings.tags.size() && !snapshot.strings.tags[tag].empty()) {
      if (report.bands.size() < kMaxBands) {
        // The stage lasts until the next event (with another tag) begins.
        const double begin = clock.at(static_cast<std::uint32_t>(i));
        const double end = clock.at(static_cast<std::uint32_t>(j + 1 < events.size() ? j + 1 : j));
        report.bands.push_back(
            {snapshot.strings.tags[tag], begin, end, fmt::format("events {} to {}", i, j)});
      } else {
        ++dropped;
      }
    }
    i = j + 1;
  }
  if (dropped > 0) {
    report.notes.push_back(fmt::format(
        "The trace's tags change often: the chart shows the first {} stages, {} more are not "
        "drawn.",
        kMaxBands, dropped));
  }
}

// The segments when the peak was reached: the plan replayed again, on the same settings and
// device, up to and including the peak's op.
report::SegmentMap segments_at_peak(const ReplayReportInput& input, const Clock& clock) {
  const ReplayPlan& plan = *input.plan;
  const ReplayResult& result = *input.result;
  ReplayPlan upto = plan;
  upto.ops.resize(std::min(plan.ops.size(), result.peak.op + 1));
  auto backend = std::make_shared<SimulatedBackend>(input.capacity > 0    ? input.capacity
                                                    : result.capacity > 0 ? result.capacity
                                                                          : 80 * GiB);
  CachingAllocator allocator(backend, input.config);
  const ReplayResult again = replay(upto, allocator, false);
  const Snapshot snapshot = allocator.snapshot();

  // Which op allocated each live block: live_pointers are the live slots in slot order
  // (replay.hpp), so the same walk over the truncated plan names them, unless an allocation
  // failed on the way (then the blocks keep their sizes only).
  std::vector<const ReplayOp*> alloc_of(plan.allocations, nullptr);
  std::vector<std::uint8_t> freed(plan.allocations, 0);
  for (const ReplayOp& op : upto.ops) {
    if (op.slot >= plan.allocations) continue;
    if (op.is_free) {
      freed[op.slot] = 1;
    } else {
      alloc_of[op.slot] = &op;
    }
  }
  const auto index_of = [&](const ReplayOp* op) {
    return static_cast<std::size_t>(op - upto.ops.data());
  };
  std::vector<const ReplayOp*> live;
  for (std::size_t slot = 0; slot < plan.allocations; ++slot) {
    if (alloc_of[slot] != nullptr && freed[slot] == 0) live.push_back(alloc_of[slot]);
  }
  std::unordered_map<std::uintptr_t, const ReplayOp*> op_at;
  if (again.num_ooms == 0 && live.size() == again.live_pointers.size()) {
    for (std::size_t k = 0; k < live.size(); ++k) {
      op_at.emplace(reinterpret_cast<std::uintptr_t>(again.live_pointers[k]), live[k]);
    }
  }

  std::unordered_map<StackId, const TraceFrame*> where_cache;
  report::SegmentMap map;
  map.title = "Segments at peak reserved (" + moment_label(result.peak, clock) + ")";
  for (const SegmentInfo& seg : snapshot.segments) {
    report::SegmentMap::Segment out;
    out.address = seg.address;
    out.size = seg.total_size;
    out.label =
        fmt::format("{} segment, stream {}, {} allocated", seg.small_pool ? "small" : "large",
                    seg.stream, format_size(seg.allocated_size));
    for (const BlockInfo& b : seg.blocks) {
      std::string label = format_size(b.size);
      if (b.state != BlockState::inactive) {
        label += fmt::format(" (requested {})", format_size(b.requested_size));
        const auto it = op_at.find(b.address);
        if (it != op_at.end()) {
          const ReplayOp& op = *it->second;
          label += ", " + where_of(*input.snapshot, op, index_of(&op), plan, where_cache);
        }
      }
      out.blocks.push_back({b.address - seg.address, b.size, to_string(b.state), label});
    }
    map.segments.push_back(std::move(out));
  }
  return map;
}

std::string fit_text(const std::optional<FitResult>& fit) {
  if (!fit) return "-";
  if (!fit->fits) return "not up to " + format_size(fit->max_capacity);
  return format_size(fit->capacity) + " (" + format_size_exact(fit->capacity) + ")";
}

// The key / value lines at the top: the peaks, the allocator's counts and the first OOM.
std::vector<std::pair<std::string, std::string>> replay_summary(const ReplayPlan& plan,
                                                                const ReplayResult& result,
                                                                const Clock& clock) {
  std::vector<std::pair<std::string, std::string>> summary = {
      {"peak reserved", at_moment(format_bytes(result.peak_reserved), result.peak, clock)},
      {"peak live (requested)",
       at_moment(format_bytes(result.peak_requested), result.peak_live, clock)},
      {"reserved / peak live", percent_ratio(result.reserved_over_peak_live)},
      {"segments (peak)", std::to_string(result.peak_segments)},
      {"device mallocs", std::to_string(result.num_device_alloc)},
      {"device frees", std::to_string(result.num_device_free)},
      {"allocation retries", std::to_string(result.num_alloc_retries)},
      {"out-of-memory errors", std::to_string(result.num_ooms)},
      {"allocations and frees", format_count(plan.traced_ops)},
  };
  if (result.num_ooms > 0 && result.first_oom.happened()) {
    summary.emplace_back(
        "first out of memory",
        fmt::format("{}: {} requested with {} reserved and {} live",
                    moment_label(result.first_oom, clock), format_size(result.first_oom.request),
                    format_bytes(result.first_oom.reserved_bytes),
                    format_bytes(result.first_oom.live_bytes)));
  }
  if (plan.starting_blocks() != 0) {
    summary.emplace_back("blocks live when recording began", format_count(plan.starting_blocks()));
  }
  return summary;
}

// One point per op at its event's time; the starting live set at the first event's.
std::vector<report::Series> replay_series(const ReplayPlan& plan, const ReplayResult& result,
                                          const Clock& clock) {
  const std::size_t n = std::min(result.series.size(), plan.ops.size());
  if (n == 0) return {};
  report::Series allocated{"allocated", {}, {}, false, true};
  report::Series reserved{"reserved", {}, {}, false, true};
  report::Series live{"live (requested)", {}, {}, false, true};
  live.dashed = true;  // it runs just under "allocated" and would be hidden by it
  for (report::Series* s : {&allocated, &reserved, &live}) {
    s->t.reserve(n);
    s->bytes.reserve(n);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const double t = clock.at(plan.ops[i].event);
    const ReplaySample& sample = result.series[i];
    allocated.t.push_back(t);
    allocated.bytes.push_back(static_cast<double>(sample.allocated_bytes));
    reserved.t.push_back(t);
    reserved.bytes.push_back(static_cast<double>(sample.reserved_bytes));
    live.t.push_back(t);
    live.bytes.push_back(static_cast<double>(sample.requested_bytes));
  }
  return {std::move(reserved), std::move(allocated), std::move(live)};
}

// The peak's marker and the segments at the peak, with their count in the summary.
void add_peak(const ReplayReportInput& input, const Clock& clock, report::Report& report) {
  const ReplayPlan& plan = *input.plan;
  const ReplayResult& result = *input.result;
  if (!result.peak.happened() || result.peak.op >= plan.ops.size()) return;
  const double t = clock.at(plan.ops[result.peak.op].event);
  const std::string label =
      fmt::format("peak reserved {} at {}", format_bytes(result.peak_reserved),
                  moment_label(result.peak, clock));
  report.peak = report::Marker{"reserved", t, static_cast<double>(result.peak_reserved), label};
  report.segment_map = segments_at_peak(input, clock);
  report.summary.emplace_back("segments at the peak",
                              std::to_string(report.segment_map->segments.size()));
}

// What was live at peak live, and at peak reserved when that was another moment.
void add_live_tables(const ReplayResult& result, const Clock& clock, report::Report& report) {
  if (!result.peak_live.happened()) return;
  const bool same = result.peak_live.op == result.peak.op;
  report.tables.push_back(
      sites_table(same ? "Live at peak live and peak reserved" : "Live at peak live",
                  result.peak_live, result.at_peak_live, clock));
  if (!same && result.peak.happened()) {
    report.tables.push_back(
        sites_table("Live at peak reserved", result.peak, result.at_peak_reserved, clock));
  }
}

report::Table comparison_table(const Comparison& comparison) {
  report::Table t{"Settings side by side",
                  {"settings", "peak reserved", "peak live", "reserved / peak live", "segments",
                   "retries", "OOMs", "smallest device"},
                  {false, true, true, true, true, true, true, true},
                  {},
                  "each row is its own replay of the same trace"};
  for (const ComparisonRow& row : comparison.rows) {
    const ReplayResult& r = row.replay;
    t.rows.push_back({r.config.empty() ? "(defaults)" : r.config, format_bytes(r.peak_reserved),
                      format_bytes(r.peak_requested), percent_ratio(r.reserved_over_peak_live),
                      format_count(static_cast<std::uint64_t>(r.peak_segments)),
                      format_count(static_cast<std::uint64_t>(r.num_alloc_retries)),
                      format_count(static_cast<std::uint64_t>(r.num_ooms)), fit_text(row.fit)});
  }
  return t;
}

// The capacities each setting's search tried, smallest first (the search's own order jumps
// about); one row per setting and capacity. `fits` is not empty.
report::Table fit_table(const std::vector<std::pair<std::string, const FitResult*>>& fits) {
  const FitResult& first = *fits.front().second;
  report::Table t{
      "Would it fit: capacities tried",
      {"settings", "capacity", "fits"},
      {false, true, false},
      {},
      fmt::format("bisection in steps of {}, per setting, smallest capacity first; nothing "
                  "below the peak live bytes ({}) can fit",
                  format_size_exact(first.precision), format_size(first.lower_bound))};
  for (const auto& [config, fit] : fits) {
    std::vector<std::pair<std::size_t, bool>> probes = fit->probes;
    std::sort(probes.begin(), probes.end());
    probes.erase(std::unique(probes.begin(), probes.end()), probes.end());
    for (const auto& [capacity, fitted] : probes) {
      t.rows.push_back({config.empty() ? "(defaults)" : config, format_size_exact(capacity),
                        fitted ? "yes" : "no"});
    }
  }
  return t;
}

// The side-by-side table of --config, the smallest device of --fit and what each search tried.
void add_fit(const ReplayReportInput& input, report::Report& report) {
  if (input.comparison != nullptr && !input.comparison->rows.empty()) {
    report.tables.push_back(comparison_table(*input.comparison));
  }
  std::vector<std::pair<std::string, const FitResult*>> fits;
  if (input.comparison != nullptr) {
    for (const ComparisonRow& row : input.comparison->rows) {
      if (row.fit) fits.emplace_back(row.replay.config, &*row.fit);
    }
  } else if (input.fit != nullptr) {
    fits.emplace_back(input.result->config, input.fit);
  }
  if (input.fit != nullptr)
    report.summary.emplace_back("smallest device that fits", fit_text(*input.fit));
  if (!fits.empty()) report.tables.push_back(fit_table(fits));
}

}  // namespace

report::Report report_of_replay(const ReplayReportInput& input) {
  report::Report report;
  if (input.snapshot == nullptr || input.plan == nullptr || input.result == nullptr) {
    return report;
  }
  const ReplayResult& result = *input.result;
  const Clock clock = clock_of(*input.snapshot, input.device);

  report.title = "memscope replay: " + input.source;
  report.subtitle =
      fmt::format("{}, device {}, settings {}, simulated device of {}", input.source, input.device,
                  result.config.empty() ? "(defaults)" : "\"" + result.config + "\"",
                  format_size_exact(input.capacity));
  report.x_label = clock.has_time ? "time since the trace's first event (s)"
                                  : "event (the trace records no times)";
  report.summary = replay_summary(*input.plan, result, clock);
  report.series = replay_series(*input.plan, result, clock);
  add_bands(*input.snapshot, clock, report);
  add_peak(input, clock, report);
  report.notes.push_back(
      "Replayed through memscope's caching allocator on a simulated device: one point per "
      "allocation or free, at the time of its trace event; what was live before the trace "
      "began is placed at the first event.");
  if (result.num_ooms > 0) {
    report.notes.push_back(fmt::format(
        "{} allocations did not fit on the simulated device of {} (their frees were skipped).",
        result.num_ooms, format_size_exact(input.capacity)));
  }
  add_live_tables(result, clock, report);
  add_fit(input, report);
  return report;
}

}  // namespace memscope::cli

// The report of a replay (replay_report.hpp), and the texts of replay.hpp's results that render
// it: ReplayResult::explain(), Comparison::table(), FitResult::explain().
#include "memscope/replay_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memscope/config.hpp"
#include "memscope/errors.hpp"
#include "memscope/report_text.hpp"
#include "memscope/trace.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

// More bands than this would hide the lines under stripes; tags that change every few events
// are better read from the sites table.
constexpr std::size_t kMaxBands = 200;

std::string settings_name(const std::string& config) {
  return config.empty() ? std::string("(defaults)") : config;
}

std::string count(std::int64_t n) {
  return format_count(static_cast<std::uint64_t>(n));
}

// "12.97 GiB at event 1,402 (t+0.138 s)": a peak and when it was reached.
std::string at_moment(const std::string& value, const ReplayMoment& m, std::int64_t start_us) {
  return m.happened() ? value + " at " + moment_text(m, start_us) : value;
}

// Whether the replayed settings turned expandable segments on (they parsed when replayed).
bool expandable_settings(const std::string& config) {
  try {
    return AllocatorConfig::parse(config).expandable_segments;
  } catch (const ConfigError&) {
    return false;
  }
}

std::string fit_text(const FitResult* fit) {
  if (fit == nullptr) return "-";
  if (!fit->fits) return "not up to " + format_size(fit->max_capacity);
  return format_size(fit->capacity) + " (" + format_size_exact(fit->capacity) + ")";
}

// The key / value lines at the top: the peaks, the allocator's counts and the first OOM.
std::vector<std::pair<std::string, std::string>> summary_of(const ReplayResult& r) {
  const std::int64_t start = r.trace_start_us;
  std::vector<std::pair<std::string, std::string>> summary = {
      {"peak reserved", at_moment(format_bytes(r.peak_reserved), r.peak, start)},
      {"peak live (requested)", at_moment(format_bytes(r.peak_requested), r.peak_live, start)},
      {"reserved / peak live", fmt::format("{:.4f}", r.reserved_over_peak_live)},
  };
  if (expandable_settings(r.config)) {
    // Expandable segments: a segment is a mapped range, and the device calls are page maps.
    const double per_thousand =
        r.operations == 0 ? 0.0
                          : 1000.0 * static_cast<double>(r.num_device_alloc + r.num_device_free) /
                                static_cast<double>(r.operations);
    summary.emplace_back("mapped ranges (peak)", count(r.peak_segments));
    summary.emplace_back("page maps", count(r.num_device_alloc));
    summary.emplace_back("page unmaps", fmt::format("{} ({:.1f} maps and unmaps per 1,000 ops)",
                                                    count(r.num_device_free), per_thousand));
  } else {
    summary.emplace_back("segments (peak)", count(r.peak_segments));
    summary.emplace_back("device mallocs", count(r.num_device_alloc));
    summary.emplace_back("device frees", count(r.num_device_free));
  }
  summary.emplace_back("allocation retries", count(r.num_alloc_retries));
  if (r.num_ooms == 0) {
    summary.emplace_back("out-of-memory errors", "0");
  } else {
    summary.emplace_back(
        "out-of-memory errors",
        r.stopped_at_oom
            ? "1 allocation refused, the replay stopped there"
            : fmt::format("{} allocations refused (their frees skipped)", count(r.num_ooms)));
  }
  summary.emplace_back("allocations and frees", format_count(r.operations - r.starting_blocks));
  if (r.num_ooms > 0 && r.first_oom.happened()) {
    summary.emplace_back(
        "first out of memory",
        fmt::format("{}: {} requested with {} reserved and {} live",
                    moment_text(r.first_oom, start), format_size(r.first_oom.request),
                    format_bytes(r.first_oom.reserved_bytes),
                    format_bytes(r.first_oom.live_bytes)));
  }
  if (r.starting_blocks != 0) {
    summary.emplace_back("blocks live when recording began", format_count(r.starting_blocks));
  }
  return summary;
}

// One table of what was live at a moment, by site.
report::Table sites_table(const std::string& label, const ReplayMoment& m,
                          const LiveBreakdown& live, std::int64_t start_us) {
  report::Table sites{
      fmt::format("{}, {}, by site", label, moment_text(m, start_us)),
      {"where", "bytes", "share", "count"},
      {false, true, true, true},
      {},
      fmt::format("{} live in {} allocations; each stack is blamed on its innermost frame of "
                  "user code (docs/traces.md)",
                  format_size(live.bytes), format_count(live.count))};
  for (const ReplaySite& s : live.top_sites) {
    const double share =
        live.bytes == 0 ? 0.0
                        : 100.0 * static_cast<double>(s.bytes) / static_cast<double>(live.bytes);
    sites.rows.push_back(
        {s.where(), format_size(s.bytes), fmt::format("{:.1f}%", share), format_count(s.count)});
  }
  return sites;
}

// What was live at peak live, and at peak reserved when that was another moment.
void add_live_tables(const ReplayResult& r, report::Report& report) {
  if (!r.peak_live.happened()) return;
  const bool same = r.peak.happened() && r.peak_live.op == r.peak.op;
  report.tables.push_back(
      sites_table(same ? "Live at peak live and peak reserved" : "Live at peak live", r.peak_live,
                  r.at_peak_live, r.trace_start_us));
  if (!same && r.peak.happened()) {
    report.tables.push_back(
        sites_table("Live at peak reserved", r.peak, r.at_peak_reserved, r.trace_start_us));
  }
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
      t.rows.push_back({settings_name(config), format_size_exact(capacity), fitted ? "yes" : "no"});
    }
  }
  return t;
}

// The side-by-side table of several settings, the smallest device and what each search tried.
void add_fit(const ReplayReportInput& input, report::Report& report) {
  if (input.comparison != nullptr && !input.comparison->rows.empty()) {
    report.tables.push_back(settings_table(*input.comparison));
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
    report.summary.emplace_back("smallest device that fits", fit_text(input.fit));
  if (!fits.empty()) report.tables.push_back(fit_table(fits));
}

// ---- The chart and the segment map: with the trace ----------------------------------------

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

// The segments when the peak was reached, as the replay kept them (ReplayOptions::peak_layout),
// each allocated block named by the code that allocated it.
report::SegmentMap segments_at_peak(const TorchSnapshot& trace, const ReplayPlan& plan,
                                    const ReplayResult& result, const PeakLayout& layout) {
  std::unordered_map<StackId, const TraceFrame*> where_cache;
  report::SegmentMap map;
  map.title = "Segments at peak reserved, " + moment_text(result.peak, result.trace_start_us);
  for (const SegmentInfo& seg : layout.segments) {
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
        const std::size_t op = layout.op_at(b.address);
        if (op < plan.ops.size()) {
          label += ", " + where_of(trace, plan.ops[op], op, plan, where_cache);
        }
      }
      out.blocks.push_back({b.address - seg.address, b.size, to_string(b.state), label});
    }
    map.segments.push_back(std::move(out));
  }
  return map;
}

// One point per op at its event's time; the starting live set at the first event's.
std::vector<report::Series> series_of(const ReplayPlan& plan, const ReplayResult& result,
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

// The lines over the trace's time, the stage bands, the peak's marker and the segments at the
// peak, with their count in the summary.
void add_chart(const TorchSnapshot& trace, const ReplayPlan& plan, const ReplayResult& result,
               report::Report& report) {
  const Clock clock = clock_of(trace, result.device);
  report.x_label = clock.has_time ? "time since the trace's first event (s)"
                                  : "event (the trace records no times)";
  report.series = series_of(plan, result, clock);
  add_bands(trace, clock, report);
  if (!report.series.empty()) {
    report.notes.push_back(
        "Replayed through memscope's caching allocator on a simulated device: one point per "
        "allocation or free, at the time of its trace event; what was live before the trace "
        "began is placed at the first event.");
  }
  if (!result.peak.happened() || result.peak.op >= plan.ops.size()) return;
  const double t = clock.at(plan.ops[result.peak.op].event);
  const std::string label =
      fmt::format("peak reserved {} at {}", format_bytes(result.peak_reserved),
                  moment_text(result.peak, result.trace_start_us));
  report.peak = report::Marker{"reserved", t, static_cast<double>(result.peak_reserved), label};
  if (result.peak_layout) {
    report.segment_map = segments_at_peak(trace, plan, result, *result.peak_layout);
    report.summary.emplace_back("segments at the peak",
                                std::to_string(report.segment_map->segments.size()));
  }
}

}  // namespace

std::string moment_text(const ReplayMoment& m, std::int64_t trace_start_us) {
  if (!m.happened()) return "-";
  if (m.event == kBeforeTrace) {
    return fmt::format("the starting live set (block {} of those live when recording began)",
                       format_count(m.op + 1));
  }
  std::string out = "event " + format_count(m.event);
  std::vector<std::string> notes;
  if (m.time_us != 0 && trace_start_us != 0) {
    notes.push_back(
        fmt::format("t+{:.3f} s", static_cast<double>(m.time_us - trace_start_us) / 1e6));
  }
  if (!m.tag.empty()) notes.push_back("stage '" + m.tag + "'");
  if (!notes.empty()) {
    out += " (";
    for (std::size_t i = 0; i < notes.size(); ++i) out += (i > 0 ? ", " : "") + notes[i];
    out += ")";
  }
  return out;
}

report::Table settings_table(const Comparison& comparison) {
  const bool with_fit = std::any_of(comparison.rows.begin(), comparison.rows.end(),
                                    [](const ComparisonRow& r) { return r.fit.has_value(); });
  report::Table t{"Settings side by side",
                  {"settings", "peak reserved", "peak live", "reserved / peak live", "segments",
                   "retries", "OOMs"},
                  {},
                  {},
                  "each row is its own replay of the same trace"};
  if (with_fit) t.columns.emplace_back("smallest device");
  t.numeric.assign(t.columns.size(), true);
  t.numeric[0] = false;  // the settings
  for (const ComparisonRow& row : comparison.rows) {
    const ReplayResult& r = row.replay;
    std::vector<std::string> cells = {settings_name(r.config),
                                      format_bytes(r.peak_reserved),
                                      format_bytes(r.peak_requested),
                                      fmt::format("{:.4f}", r.reserved_over_peak_live),
                                      count(r.peak_segments),
                                      count(r.num_alloc_retries),
                                      count(r.num_ooms)};
    if (with_fit) cells.push_back(fit_text(row.fit ? &*row.fit : nullptr));
    t.rows.push_back(std::move(cells));
  }
  return t;
}

report::Report replay_report(const ReplayReportInput& input) {
  report::Report report;
  if (input.result == nullptr) return report;
  const ReplayResult& r = *input.result;
  report.title = "memscope replay: " +
                 (input.source.empty() ? fmt::format("device {}", r.device) : input.source);
  report.subtitle =
      fmt::format("{}device {}, settings {}", input.source.empty() ? "" : input.source + ", ",
                  r.device, r.config.empty() ? "(defaults)" : "\"" + r.config + "\"");
  if (r.capacity != 0) report.subtitle += ", simulated device of " + format_size_exact(r.capacity);
  report.summary = summary_of(r);
  if (input.snapshot != nullptr && input.plan != nullptr) {
    add_chart(*input.snapshot, *input.plan, r, report);
  }
  add_live_tables(r, report);
  add_fit(input, report);
  return report;
}

std::string ReplayResult::explain() const {
  return report::render_text(replay_report({.result = this}));
}

std::string Comparison::table() const {
  report::Report report;
  report.tables.push_back(settings_table(*this));
  return report::render_text(report);
}

std::string FitResult::explain() const {
  if (!fits) {
    return fmt::format(
        "settings {}: out of memory on every device tried, up to {} (peak live {}); a "
        "memory_limit in the settings caps what any device can give",
        settings_name(config), format_size(max_capacity), format_size(lower_bound));
  }
  return fmt::format(
      "settings {}: fits on {} (replays without out-of-memory there, fails on {} less; "
      "precision {}); peak live {}; {} replays. The allocator is not monotonic in capacity: a "
      "smaller device may fit too.",
      settings_name(config), format_size(capacity), format_size(precision), format_size(precision),
      format_size(lower_bound), probes.size());
}

}  // namespace memscope

// Text reports of replays: one result explained, a fit search, settings side by side.
#include <fmt/core.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/text.hpp"
#include "memscope/config.hpp"
#include "memscope/errors.hpp"
#include "memscope/report.hpp"
#include "memscope/report_text.hpp"
#include "memscope/trace.hpp"

namespace memscope {
namespace {

using detail::group_digits;

std::string settings_name(const std::string& config) {
  return config.empty() ? std::string("default") : config;
}

// "event 8,123 (t+1.234 s, stage 'backward')", or where a moment came from otherwise.
std::string moment_text(const ReplayMoment& m, std::int64_t trace_start_us) {
  if (!m.happened()) return "-";
  if (m.event == kBeforeTrace) {
    return fmt::format("the starting live set (block {} of those live when recording began)",
                       group_digits(m.op + 1));
  }
  std::string out = "event " + group_digits(m.event);
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

// Rows with no titles through the one table renderer (report_text.hpp). `align` has one letter
// per column, 'l' or 'r'; text reads best left, numbers right.
std::string aligned(std::vector<std::vector<std::string>> rows, std::size_t indent,
                    std::string_view align) {
  report::Table table;
  table.columns.assign(align.size(), "");
  for (const char a : align) table.numeric.push_back(a != 'l');
  table.rows = std::move(rows);
  return report::render_text(table, {.indent = indent, .header = false});
}

// Whether the replayed settings turned expandable segments on (they parsed when replayed).
bool expandable_settings(const std::string& config) {
  try {
    return AllocatorConfig::parse(config).expandable_segments;
  } catch (const ConfigError&) {
    return false;
  }
}

// "live at peak live, event 1,255 (t+0.120 s): 12.97 GiB in 504 allocations; top sites:" and
// the sites, one aligned row each.
std::string live_text(std::string_view label, const ReplayMoment& m, const LiveBreakdown& live,
                      std::int64_t trace_start_us) {
  std::string out =
      fmt::format("live {}, {}: {} in {} allocations", label, moment_text(m, trace_start_us),
                  format_size(live.bytes), group_digits(live.count));
  if (live.top_sites.empty()) return out + "\n";
  out += "; top sites:\n";
  std::vector<std::vector<std::string>> sites;
  for (const ReplaySite& s : live.top_sites) {
    const double share =
        live.bytes == 0 ? 0.0
                        : 100.0 * static_cast<double>(s.bytes) / static_cast<double>(live.bytes);
    sites.push_back({s.where(), format_size(s.bytes), fmt::format("{:.1f}%", share),
                     group_digits(s.count) + (s.count == 1 ? " alloc" : " allocs")});
  }
  return out + aligned(std::move(sites), 2, "lrrr");
}

}  // namespace

std::string ReplayResult::explain() const {
  std::string out = fmt::format("replay of device {}, settings: {}", device, settings_name(config));
  if (capacity != 0) out += ", simulated device of " + format_size(capacity);
  out += fmt::format(": {} allocations and frees", group_digits(operations - starting_blocks));
  if (starting_blocks != 0) {
    out += fmt::format(" after {} blocks live when recording began", group_digits(starting_blocks));
  }
  out += "\n";
  std::vector<std::vector<std::string>> rows;
  rows.push_back(
      {"peak reserved", format_bytes(peak_reserved), "at " + moment_text(peak, trace_start_us)});
  rows.push_back(
      {"peak live", format_bytes(peak_requested), "at " + moment_text(peak_live, trace_start_us)});
  rows.push_back({"reserved / peak live", fmt::format("{:.4f}", reserved_over_peak_live), ""});
  if (expandable_settings(config)) {
    // Expandable segments: a segment is a mapped range, and the device calls are page maps.
    const double per_thousand =
        operations == 0 ? 0.0
                        : 1000.0 * static_cast<double>(num_device_alloc + num_device_free) /
                              static_cast<double>(operations);
    rows.push_back(
        {"mapped ranges", group_digits(static_cast<std::uint64_t>(peak_segments)),
         fmt::format("at most; {} maps, {} unmaps ({:.1f} per 1,000 ops), {} retries",
                     group_digits(static_cast<std::uint64_t>(num_device_alloc)),
                     group_digits(static_cast<std::uint64_t>(num_device_free)), per_thousand,
                     group_digits(static_cast<std::uint64_t>(num_alloc_retries)))});
  } else {
    rows.push_back({"segments", group_digits(static_cast<std::uint64_t>(peak_segments)),
                    fmt::format("at most; {} reserved, {} released, {} retries",
                                group_digits(static_cast<std::uint64_t>(num_device_alloc)),
                                group_digits(static_cast<std::uint64_t>(num_device_free)),
                                group_digits(static_cast<std::uint64_t>(num_alloc_retries)))});
  }
  if (num_ooms == 0) {
    rows.push_back({"out of memory", "none", ""});
  } else {
    rows.push_back(
        {"out of memory", group_digits(static_cast<std::uint64_t>(num_ooms)),
         fmt::format("{}; the first at {}: {} asked with {} reserved",
                     stopped_at_oom ? "allocation refused, replay stopped" : "allocations refused",
                     moment_text(first_oom, trace_start_us), format_size(first_oom.request),
                     format_bytes(first_oom.reserved_bytes))});
  }
  out += aligned(std::move(rows), 2, "lrl");
  const bool same = peak_live.op == peak.op;
  if (peak_live.happened()) {
    out += live_text(same && peak.happened() ? "at peak live and peak reserved" : "at peak live",
                     peak_live, at_peak_live, trace_start_us);
  }
  if (peak.happened() && !same) {
    out += live_text("at peak reserved", peak, at_peak_reserved, trace_start_us);
  }
  return out;
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

std::string Comparison::table() const {
  const bool with_fit = std::any_of(rows.begin(), rows.end(),
                                    [](const ComparisonRow& r) { return r.fit.has_value(); });
  report::Table table;
  std::vector<std::string> head = {"settings", "peak reserved", "peak live", "reserved/live",
                                   "segments", "retries",       "OOMs"};
  if (with_fit) head.emplace_back("fits on");
  table.columns = std::move(head);
  table.numeric.assign(table.columns.size(), true);
  table.numeric[0] = false;  // the settings
  for (const ComparisonRow& row : rows) {
    const ReplayResult& r = row.replay;
    std::vector<std::string> line = {settings_name(r.config),
                                     format_bytes(r.peak_reserved),
                                     format_bytes(r.peak_requested),
                                     fmt::format("{:.4f}", r.reserved_over_peak_live),
                                     group_digits(static_cast<std::uint64_t>(r.peak_segments)),
                                     group_digits(static_cast<std::uint64_t>(r.num_alloc_retries)),
                                     group_digits(static_cast<std::uint64_t>(r.num_ooms))};
    if (with_fit) {
      line.push_back(!row.fit ? "-" : row.fit->fits ? format_size(row.fit->capacity) : "never");
    }
    table.rows.push_back(std::move(line));
  }
  return report::render_text(table, {.rule = false});
}

}  // namespace memscope

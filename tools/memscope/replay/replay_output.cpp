// Text, JSON and HTML of a replay (replay_output.hpp).
#include "replay/replay_output.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "memscope/report_decimate.hpp"
#include "memscope/report_json.hpp"
#include "memscope/report_text.hpp"
#include "memscope/units.hpp"
#include "report/report_builders.hpp"

namespace memscope::cli {
namespace {

using Json = nlohmann::json;

// 2: "peak_live" (what was live at peak live) beside "peak" (at peak reserved), each with its
// sites; the top-level top_sites are peak live's (version 1: peak reserved's).
constexpr int kReplayFormatVersion = 2;

std::string settings_name(const std::string& config) {
  return config.empty() ? std::string("default") : config;
}

// Seconds from the trace's first event, or null when the trace records no times.
Json time_s(const ReplayMoment& m, std::int64_t start_us) {
  if (m.time_us == 0 || start_us == 0) return nullptr;
  return static_cast<double>(m.time_us - start_us) / 1e6;
}

Json event_of(const ReplayMoment& m) {
  return m.event == kBeforeTrace ? Json(nullptr) : Json(m.event);
}

// "event 8,123 (t+1.234 s, stage 'backward')"
std::string moment_words(const ReplayMoment& m, std::int64_t start_us) {
  std::string out =
      m.event == kBeforeTrace ? "the starting live set" : "event " + format_count(m.event);
  const Json t = time_s(m, start_us);
  if (!t.is_null()) out += fmt::format(" (t+{:.3f} s", t.get<double>());
  if (!m.tag.empty()) out += (t.is_null() ? " (" : ", ") + ("stage '" + m.tag + "'");
  if (!t.is_null() || !m.tag.empty()) out += ")";
  return out;
}

Json fit_json(const std::optional<FitResult>& fit) {
  if (!fit) return nullptr;
  Json probes = Json::array();
  for (const auto& [capacity, fits] : fit->probes) probes.push_back(Json::array({capacity, fits}));
  return Json{{"fits", fit->fits},
              {"capacity", fit->fits ? Json(fit->capacity) : Json(nullptr)},
              {"precision", fit->precision},
              {"lower_bound", fit->lower_bound},
              {"max_capacity", fit->max_capacity},
              {"probes", std::move(probes)}};
}

// A peak and what was live there: "peak" (reserved) and "peak_live" of the JSON.
Json moment_json(const ReplayMoment& m, const LiveBreakdown& live, std::int64_t start_us) {
  if (!m.happened()) return nullptr;
  Json sites = Json::array();
  for (const ReplaySite& s : live.top_sites) {
    sites.push_back(Json{{"where", s.where()},
                         {"file", s.frame.filename},
                         {"line", s.frame.line},
                         {"function", s.frame.name},
                         {"origin", to_string(s.origin)},
                         {"bytes", s.bytes},
                         {"count", s.count}});
  }
  return Json{{"event", event_of(m)},
              {"time_s", time_s(m, start_us)},
              {"stage", m.tag},
              {"reserved", m.reserved_bytes},
              {"live", live.bytes},
              {"live_count", live.count},
              {"top_sites", std::move(sites)}};
}

Json row_json(const ComparisonRow& row) {
  const ReplayResult& r = row.replay;
  Json first_oom = nullptr;
  if (r.num_ooms != 0 && r.first_oom.happened()) {
    first_oom = Json{{"event", event_of(r.first_oom)},
                     {"time_s", time_s(r.first_oom, r.trace_start_us)},
                     {"stage", r.first_oom.tag},
                     {"request", r.first_oom.request},
                     {"reserved", r.first_oom.reserved_bytes},
                     {"live", r.first_oom.live_bytes}};
  }
  return Json{{"config", r.config},
              {"peak_reserved", r.peak_reserved},
              {"peak_allocated", r.peak_allocated},
              {"peak_requested", r.peak_requested},
              {"ratio", r.reserved_over_peak_live},
              {"segments", r.peak_segments},
              {"num_device_alloc", r.num_device_alloc},
              {"num_device_free", r.num_device_free},
              {"retries", r.num_alloc_retries},
              {"ooms", r.num_ooms},
              {"first_oom", std::move(first_oom)},
              {"fit", fit_json(row.fit)}};
}

// Field access for the saved JSON, with errors naming the file and the field.
const Json& field(const Json& object, const char* key, const std::string& where,
                  const std::string& source) {
  if (!object.is_object() || !object.contains(key)) {
    throw InputFailure(source + ": " + where + key + " is missing (a memscope-replay file as " +
                       "written by memscope replay --json has it)");
  }
  return object[key];
}

std::int64_t int_field(const Json& object, const char* key, const std::string& where,
                       const std::string& source) {
  const Json& v = field(object, key, where, source);
  if (!v.is_number_integer()) {
    throw InputFailure(source + ": " + where + key + ": expected an integer, found " +
                       v.type_name());
  }
  return v.get<std::int64_t>();
}

std::string bytes_text(const Json& object, const char* key, const std::string& where,
                       const std::string& source) {
  return format_bytes(int_field(object, key, where, source));
}

// The sites of a saved replay ("top_sites" of a moment, or of a version 1 file).
std::string saved_sites_text(const Json& sites, const std::string& where_prefix,
                             const std::string& source) {
  if (!sites.is_array() || sites.empty()) return {};
  report::TextTable top({{"site"}, {"live", true}, {"allocations", true}});
  for (std::size_t i = 0; i < sites.size(); ++i) {
    const std::string where = fmt::format("{}[{}].", where_prefix, i);
    const Json& w = field(sites[i], "where", where, source);
    top.add_row({w.is_string() ? w.get<std::string>() : w.dump(),
                 bytes_text(sites[i], "bytes", where, source),
                 std::to_string(int_field(sites[i], "count", where, source))});
  }
  return top.render(2);
}

// "peak live at event 1,255 (t+0.120 s), stage 'fwd': live there 12.97 GiB, reserved ..." and its
// sites (version 2; version 1 kept the live bytes as live_at_peak and its sites top-level).
std::string saved_moment_text(const char* label, const Json& moment, const std::string& prefix,
                              const std::string& source, bool version_1) {
  if (!moment.is_object()) return {};
  const Json& t = field(moment, "time_s", prefix, source);
  const Json& stage = field(moment, "stage", prefix, source);
  const Json& event = field(moment, "event", prefix, source);
  std::string out =
      fmt::format("\n{} at {}{}{}: live there {}{}\n", label,
                  event.is_number_unsigned() ? "event " + format_count(event.get<std::uint64_t>())
                                             : "the starting live set",
                  t.is_number() ? fmt::format(" (t+{:.3f} s)", t.get<double>()) : "",
                  stage.is_string() && !stage.get<std::string>().empty()
                      ? ", stage '" + stage.get<std::string>() + "'"
                      : "",
                  bytes_text(moment, version_1 ? "live_at_peak" : "live", prefix, source),
                  fmt::format(", reserved {}", bytes_text(moment, "reserved", prefix, source)));
  if (!version_1) {
    out +=
        saved_sites_text(field(moment, "top_sites", prefix, source), prefix + "top_sites", source);
  }
  return out;
}

}  // namespace

std::string replay_verdict(const ReplayOutcome& outcome) {
  if (!outcome.capacity_given) return {};
  const std::string capacity = format_size(outcome.capacity);
  if (outcome.fits()) {
    const ReplayResult& r = outcome.rows[outcome.best_row()].replay;
    std::string out =
        fmt::format("fits in {}: peak reserved {}", capacity, format_bytes(r.peak_reserved));
    if (outcome.rows.size() > 1) out += " with settings " + settings_name(r.config);
    return out + "\n";
  }
  const ReplayResult& r = outcome.rows.front().replay;
  std::string out = fmt::format(
      "does not fit in {}: first OOM at {}: {} requested with {} reserved and {} live", capacity,
      moment_words(r.first_oom, r.trace_start_us), format_size(r.first_oom.request),
      format_bytes(r.first_oom.reserved_bytes), format_bytes(r.first_oom.live_bytes));
  out += fmt::format("; {} allocation{} refused", r.num_ooms, r.num_ooms == 1 ? "" : "s");
  if (outcome.rows.size() > 1) {
    out += fmt::format(" (settings {}; none of the {} settings fits)", settings_name(r.config),
                       outcome.rows.size());
  }
  return out + "\n";
}

std::string replay_text(const ReplayOutcome& outcome) {
  std::string out = fmt::format("trace {}: device {}\n", outcome.trace.string(), outcome.device);
  out += outcome.first.explain();
  if (outcome.rows.size() > 1) {
    Comparison comparison;
    comparison.rows = outcome.rows;
    out += "\nsettings side by side (device of " + format_size(outcome.capacity) + "):\n";
    out += comparison.table();
  }
  bool any_fit = false;
  for (const ComparisonRow& row : outcome.rows) {
    if (!row.fit) continue;
    if (!any_fit) out += "\nsmallest device that fits:\n";
    any_fit = true;
    out += "  " + row.fit->explain() + "\n";
  }
  if (any_fit) {
    const std::size_t best = outcome.smallest_fit_row();
    if (best < outcome.rows.size()) {
      out += fmt::format("smallest device: {} (settings {})\n",
                         format_size(outcome.rows[best].fit->capacity),
                         settings_name(outcome.rows[best].replay.config));
    } else {
      out += "smallest device: none fits, up to the largest capacity tried\n";
    }
  }
  const std::string verdict = replay_verdict(outcome);
  if (!verdict.empty()) out += "\n" + verdict;
  return out;
}

report::Report replay_report(const ReplayOutcome& outcome) {
  ReplayReportInput input;
  input.snapshot = &outcome.snapshot;
  input.plan = &outcome.plan;
  input.result = &outcome.first;
  input.device = outcome.device;
  input.config = outcome.parsed.front();
  input.capacity = outcome.capacity;
  Comparison comparison;
  if (outcome.rows.size() > 1) {
    comparison.rows = outcome.rows;
    input.comparison = &comparison;
  }
  if (outcome.rows.front().fit) input.fit = &*outcome.rows.front().fit;
  input.source = outcome.trace.filename().string();
  return report_of_replay(input);
}

// The report as stored in --json: a trace of millions of events would store millions of points
// per line, so each series is decimated (decimate.hpp: every peak and trough kept) to a size
// the page decimates again when it is drawn; a note says so.
constexpr std::size_t kStoredPointsPerSeries = 16000;

Json stored_report(report::Report report) {
  for (report::Series& s : report.series) {
    report::DecimatedSeries d = report::decimate(s.t, s.bytes, kStoredPointsPerSeries);
    if (!d.decimated()) continue;
    report.notes.push_back(fmt::format("{}: stored decimated from {} points to {}.", s.name,
                                       d.original_points, d.t.size()));
    s.t = std::move(d.t);
    s.bytes = std::move(d.values);
  }
  return report::report_to_json(report);
}

Json replay_json(const ReplayOutcome& outcome, const report::Report& report) {
  const ReplayResult& r = outcome.first;
  Json rows = Json::array();
  for (const ComparisonRow& row : outcome.rows) rows.push_back(row_json(row));
  const Json peak = moment_json(r.peak, r.at_peak_reserved, r.trace_start_us);
  const Json peak_live = moment_json(r.peak_live, r.at_peak_live, r.trace_start_us);
  return Json{{"format", "memscope-replay"},
              {"version", kReplayFormatVersion},
              {"trace", outcome.trace.string()},
              {"device", outcome.device},
              {"capacity", outcome.capacity},
              {"capacity_given", outcome.capacity_given},
              {"fits", outcome.capacity_given ? Json(outcome.fits()) : Json(nullptr)},
              {"operations", r.operations},
              {"rows", std::move(rows)},
              {"peak", peak},
              {"peak_live", peak_live},
              {"top_sites", peak_live.is_object() ? peak_live["top_sites"] : Json::array()},
              {"report", stored_report(report)}};
}

std::string replay_json_text(const Json& json, const std::string& source) {
  const std::int64_t version = int_field(json, "version", "", source);
  if (version > kReplayFormatVersion) {
    throw InputFailure(
        fmt::format("{}: memscope-replay version {}; this memscope reads version "
                    "{}: use a newer memscope",
                    source, version, kReplayFormatVersion));
  }
  const Json& trace = field(json, "trace", "", source);
  std::string out =
      fmt::format("replay of {} (device {}, simulated device of {})\n",
                  trace.is_string() ? trace.get<std::string>() : trace.dump(),
                  int_field(json, "device", "", source),
                  format_size(static_cast<std::size_t>(int_field(json, "capacity", "", source))));
  const Json& rows = field(json, "rows", "", source);
  if (!rows.is_array()) throw InputFailure(source + ": rows: expected an array");
  report::TextTable table({{"settings"},
                           {"peak reserved", true},
                           {"peak live", true},
                           {"reserved/live", true},
                           {"segments", true},
                           {"retries", true},
                           {"OOMs", true},
                           {"fits on", true}});
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string where = fmt::format("rows[{}].", i);
    const Json& row = rows[i];
    const Json& config = field(row, "config", where, source);
    const Json& ratio = field(row, "ratio", where, source);
    const Json& fit = field(row, "fit", where, source);
    std::string fits_on = "-";
    if (fit.is_object()) {
      const Json& cap = field(fit, "capacity", where + "fit.", source);
      fits_on = cap.is_number_unsigned() ? format_size(cap.get<std::size_t>()) : "never";
    }
    table.add_row({settings_name(config.is_string() ? config.get<std::string>() : ""),
                   bytes_text(row, "peak_reserved", where, source),
                   bytes_text(row, "peak_requested", where, source),
                   ratio.is_number() ? fmt::format("{:.4f}", ratio.get<double>()) : "-",
                   std::to_string(int_field(row, "segments", where, source)),
                   std::to_string(int_field(row, "retries", where, source)),
                   std::to_string(int_field(row, "ooms", where, source)), fits_on});
  }
  out += table.render();
  // Version 1 has "peak" only (its sites top-level); version 2 both moments, each with its sites.
  const Json& peak = field(json, "peak", "", source);
  if (version >= 2) {
    const Json& peak_live = field(json, "peak_live", "", source);
    if (peak_live == peak) {  // one moment: one breakdown, labelled both
      out += saved_moment_text("peak live and peak reserved", peak, "peak.", source, false);
    } else {
      out += saved_moment_text("peak live", peak_live, "peak_live.", source, false);
      out += saved_moment_text("peak reserved", peak, "peak.", source, false);
    }
  } else {
    out += saved_moment_text("peak reserved", peak, "peak.", source, true);
    if (peak.is_object()) {
      out += saved_sites_text(field(json, "top_sites", "", source), "top_sites", source);
    }
  }
  const Json& fits = field(json, "fits", "", source);
  if (fits.is_boolean()) {
    out +=
        fmt::format("\n{} in {}\n", fits.get<bool>() ? "fits" : "does not fit",
                    format_size(static_cast<std::size_t>(int_field(json, "capacity", "", source))));
  }
  return out;
}

}  // namespace memscope::cli

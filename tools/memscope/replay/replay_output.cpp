// The Report and the JSON of a replay, and the Report of a saved one (replay_output.hpp).
#include "replay/replay_output.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "memscope/errors.hpp"
#include "memscope/growth.hpp"
#include "memscope/json_envelope.hpp"
#include "memscope/json_reader.hpp"
#include "memscope/oom.hpp"
#include "memscope/replay_report.hpp"
#include "memscope/report_decimate.hpp"
#include "memscope/report_json.hpp"
#include "memscope/units.hpp"

namespace memscope::cli {
namespace {

using Json = nlohmann::json;

// 2: "peak_live" (what was live at peak live) beside "peak" (at peak reserved), each with its
// sites; the top-level top_sites are peak live's (version 1: peak reserved's).
constexpr int kReplayFormatVersion = 2;

std::string settings_name(const std::string& config) {
  return config.empty() ? std::string("(defaults)") : config;  // as the report's tables name it
}

// Seconds from the trace's first event, or null when the trace records no times.
Json time_s(const ReplayMoment& m, std::int64_t start_us) {
  if (m.time_us == 0 || start_us == 0) return nullptr;
  return static_cast<double>(m.time_us - start_us) / 1e6;
}

Json event_of(const ReplayMoment& m) {
  return m.event == kBeforeTrace ? Json(nullptr) : Json(m.event);
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

// The report as --json stores it: a trace of millions of events would store millions of points
// per line, so each series is decimated (decimate.hpp: every peak and trough kept) to a size the
// page decimates again when it is drawn; a note says so. The text and the page of `replay` show
// this same value, so `report` of the saved file prints what `replay` printed.
constexpr std::size_t kStoredPointsPerSeries = 16000;

void decimate_for_storing(report::Report& report) {
  for (report::Series& s : report.series) {
    report::DecimatedSeries d = report::decimate(s.t, s.bytes, kStoredPointsPerSeries);
    if (!d.decimated()) continue;
    report.notes.push_back(
        fmt::format("{}: decimated from {} points to {}.", s.name, d.original_points, d.t.size()));
    s.t = std::move(d.t);
    s.bytes = std::move(d.values);
  }
}

// A trace that recorded an out-of-memory error (a snapshot dumped at the OOM, memscope's own
// recording): its last OOM (the one a snapshot dumped at an OOM was dumped for) explained
// (oom.hpp) under the replay's figures, keys prefixed
// "OOM", its tables and notes after the replay's. The counterfactuals replay the window on the
// device the job could reach, not on --capacity.
void append_oom(const ReplayOutcome& outcome, report::Report& report) {
  const std::vector<std::size_t> ooms = find_ooms(outcome.snapshot, outcome.device);
  if (ooms.empty()) return;
  OomOptions o;
  o.source = outcome.trace.string();
  o.top_sites = 10;
  o.which = ooms.size() - 1;
  const report::Report oom = explain_oom(outcome.snapshot, outcome.device, o).to_report();
  report.summary.emplace_back("OOM", oom.title);
  for (const auto& [key, value] : oom.summary) report.summary.emplace_back("OOM " + key, value);
  for (const report::Table& t : oom.tables) report.tables.push_back(t);
  for (const std::string& note : oom.notes) report.notes.push_back(note);
}

// Growth across iterations (growth.hpp), when the trace marks its iterations (tags naming a
// step): one summary line, and the growing sites' table when memory grows. Boundaries detected
// from the period of the allocations are not shown here: the layers of one pass repeat like
// iterations, and their activations, kept for the backward pass, would read as growth (two
// forward passes of the corpus did); Trace.growth() offers the detection with that caveat.
void append_growth(const ReplayOutcome& outcome, report::Report& report) {
  const GrowthResult g = analyze_growth(outcome.snapshot, outcome.device);
  if (g.boundaries_from != "tags" || g.boundaries.size() < 2) return;
  const report::Report r = g.to_report();
  for (const auto& [key, value] : r.summary) {
    if (key == "verdict") report.summary.emplace_back("growth across iterations", value);
  }
  report.summary.emplace_back("iterations", r.summary.front().second);
  if (g.growing()) {
    for (const report::Table& t : r.tables) report.tables.push_back(t);
  }
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
      moment_text(r.first_oom, r.trace_start_us), format_size(r.first_oom.request),
      format_bytes(r.first_oom.reserved_bytes), format_bytes(r.first_oom.live_bytes));
  out += fmt::format("; {} allocation{} refused", r.num_ooms, r.num_ooms == 1 ? "" : "s");
  if (outcome.rows.size() > 1) {
    out += fmt::format(" (settings {}; none of the {} settings fits)", settings_name(r.config),
                       outcome.rows.size());
  }
  return out + "\n";
}

report::Report replay_report(const ReplayOutcome& outcome) {
  ReplayReportInput input;
  input.result = &outcome.first;
  input.snapshot = &outcome.snapshot;
  input.plan = &outcome.plan;
  Comparison comparison;
  if (outcome.rows.size() > 1) {
    comparison.rows = outcome.rows;
    input.comparison = &comparison;
  }
  if (outcome.rows.front().fit) input.fit = &*outcome.rows.front().fit;
  input.source = outcome.trace.filename().string();
  report::Report report = memscope::replay_report(input);
  std::string verdict = replay_verdict(outcome);
  if (!verdict.empty()) {
    verdict.pop_back();  // its '\n'
    report.summary.emplace_back("verdict", std::move(verdict));
  }
  append_oom(outcome, report);
  append_growth(outcome, report);
  decimate_for_storing(report);
  return report;
}

Json replay_json(const ReplayOutcome& outcome, const report::Report& report) {
  const ReplayResult& r = outcome.first;
  Json rows = Json::array();
  for (const ComparisonRow& row : outcome.rows) rows.push_back(row_json(row));
  const Json peak = moment_json(r.peak, r.at_peak_reserved, r.trace_start_us);
  const Json peak_live = moment_json(r.peak_live, r.at_peak_live, r.trace_start_us);
  Json out = report::envelope("replay", kReplayFormatVersion);
  out.update(Json{{"trace", outcome.trace.string()},
                  {"device", outcome.device},
                  {"capacity", outcome.capacity},
                  {"capacity_given", outcome.capacity_given},
                  {"fits", outcome.capacity_given ? Json(outcome.fits()) : Json(nullptr)},
                  {"operations", r.operations},
                  {"rows", std::move(rows)},
                  {"peak", peak},
                  {"peak_live", peak_live},
                  {"top_sites", peak_live.is_object() ? peak_live["top_sites"] : Json::array()},
                  {"report", report::report_to_json(report)}});
  return out;
}

report::Report saved_replay_report(const Json& json, const std::string& source) {
  const report::JsonSource file(source,
                                "a memscope replay result, written by 'memscope replay --json'");
  const report::JsonObject saved(file, json, "");
  (void)report::read_envelope(saved, "replay", kReplayFormatVersion);
  return report::report_from_json(saved.object("report"));
}

}  // namespace memscope::cli

// What `memscope replay` shows of a ReplayOutcome (replay_session.hpp): one Report value, whose
// text (render_text) is printed, whose page is the HTML report and which the JSON of --json
// ("format": "memscope-replay") carries, so `memscope report` renders a saved replay through the
// same Report, without the trace: `replay X` and `report X.json` print the same text.
//
// JSON layout (version 2): format, version, trace (the file as given), device, capacity
// (bytes), capacity_given, fits (bool; null when no capacity was given), operations,
// rows[] (one per setting: config, peak_reserved, peak_allocated, peak_requested, ratio,
// segments, num_device_alloc, num_device_free, retries, ooms, first_oom {event, time_s, stage,
// request, reserved, live} or null, fit {fits, capacity, precision, lower_bound, max_capacity,
// probes [[capacity, fits]...]} or null), peak and peak_live {event, time_s, stage, reserved,
// live, live_count, top_sites[] {where, file, line, function, origin, bytes, count}} of the first
// setting, top_sites (peak_live's), and report (report_to_json() of the Report). time_s is
// seconds from the trace's first event, null when the trace has no times. Memory is in bytes.
// Version 1 had "peak" only, with live_at_peak and the sites top-level; its report reads the same.
//
// Thread safety: pure functions. Errors: saved_replay_report() throws ReportFormatError naming
// `source` and the field that is missing or of the wrong type, or the version it cannot read.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "memscope/report.hpp"
#include "replay/replay_session.hpp"

namespace memscope::cli {

// The verdict alone: "fits in 24 GiB ..." / "does not fit in 24 GiB: first OOM at event ...".
// Empty when no capacity was given.
[[nodiscard]] std::string replay_verdict(const ReplayOutcome& outcome);
// The report of the first setting (replay_report(), memscope/replay_report.hpp), with the verdict,
// its series decimated to what --json stores (every peak and trough kept; a note says so).
[[nodiscard]] report::Report replay_report(const ReplayOutcome& outcome);
[[nodiscard]] nlohmann::json replay_json(const ReplayOutcome& outcome,
                                         const report::Report& report);

// The Report a saved replay JSON carries (`memscope report`).
[[nodiscard]] report::Report saved_replay_report(const nlohmann::json& json,
                                                 const std::string& source);

}  // namespace memscope::cli

// What `memscope replay` shows of a ReplayOutcome (replay_session.hpp): the text on stdout, the
// JSON of --json ("format": "memscope-replay", "version": 1) and the HTML report; and the text
// `memscope report` prints for such a JSON file later, without the trace.
//
// JSON layout (version 1): format, version, trace (the file as given), device, capacity
// (bytes), capacity_given, fits (bool; null when no capacity was given), operations,
// rows[] (one per setting: config, peak_reserved, peak_allocated, peak_requested, ratio,
// segments, num_device_alloc, num_device_free, retries, ooms, first_oom {event, time_s, stage,
// request} or null, fit {fits, capacity, precision, lower_bound, probes [[capacity, fits]...]}
// or null), peak {event, time_s, stage, reserved, live, live_at_peak, live_at_peak_count} of
// the first setting, top_sites[] {where, file, line, function, bytes, count}, and report (the
// HTML report's JSON, report_to_json()). time_s is seconds from the trace's first event, null
// when the trace has no times. Memory is in bytes.
//
// Thread safety: pure functions. Errors: replay_json_text() throws InputFailure naming
// `source` and the field that is missing or of the wrong type.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "memscope/report.hpp"
#include "replay/replay_session.hpp"

namespace memscope::cli {

// The explanation of the first setting, the settings table when there are several, the fit,
// and the verdict when a capacity was given.
[[nodiscard]] std::string replay_text(const ReplayOutcome& outcome);
// The verdict line alone: "fits in 24 GiB ..." / "does not fit in 24 GiB: first OOM at event
// ...". Empty when no capacity was given.
[[nodiscard]] std::string replay_verdict(const ReplayOutcome& outcome);
[[nodiscard]] report::Report replay_report(const ReplayOutcome& outcome);
[[nodiscard]] nlohmann::json replay_json(const ReplayOutcome& outcome,
                                         const report::Report& report);

// The text of a saved replay JSON (`memscope report`).
[[nodiscard]] std::string replay_json_text(const nlohmann::json& json, const std::string& source);

}  // namespace memscope::cli

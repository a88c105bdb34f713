// The report of a replay (replay.hpp) as the report layer's value (report.hpp): the one place
// that says what a replay shows and in which words. ReplayResult::explain() and
// Comparison::table() are its text (render_text, report_text.hpp); `memscope replay` prints,
// saves (--json) and draws (--html) the same Report, with the trace's chart added.
//
// Thread safety: pure functions of their arguments. Ownership: the input points at values the
// caller keeps alive for the call. Errors: none of its own (ConfigError only for a settings
// string that no longer parses, which replays never produce).
#pragma once

#include <cstdint>
#include <string>

#include "memscope/replay.hpp"
#include "memscope/report.hpp"

namespace memscope {

// What a replay report shows: the result alone, or with the trace it came from.
struct ReplayReportInput {
  const ReplayResult* result = nullptr;  // required: nothing is shown without it
  // The trace and the plan `result` replayed (built from it for result->device): the chart
  // (allocated, reserved and live bytes over the trace's time, replay() with record_series;
  // stage bands from the events' tags; the peak marked) and the segment map at the peak
  // (replay() with peak_layout), each block named by the code that allocated it.
  const TorchSnapshot* snapshot = nullptr;
  const ReplayPlan* plan = nullptr;
  const Comparison* comparison = nullptr;  // other settings side by side, when given
  const FitResult* fit = nullptr;          // result's smallest device, when searched
  std::string source{};                    // the trace's file name, for the title
};

// Title and subtitle; the summary (the peaks and when they happened, reserved / peak live,
// segments or mapped ranges, device calls, retries, out-of-memory errors and the first one);
// what was live at peak live and at peak reserved by site; the settings side by side and the
// capacities each fit search tried, when given; the chart and segment map with the trace.
// A moment is "event N (t+T s, stage 'S')", N the event's index in the device's trace.
[[nodiscard]] report::Report replay_report(const ReplayReportInput& input);

// "event 8,123 (t+1.234 s, stage 'backward')": the event's index in the device's trace, the
// time since the trace's first event and the tag, as far as known; "the starting live set
// (block K of those live when recording began)"; "-" for a moment that did not happen.
[[nodiscard]] std::string moment_text(const ReplayMoment& m, std::int64_t trace_start_us);

// One row per setting: peak reserved, peak live, reserved / peak live, segments, retries,
// out-of-memory errors and, when any was searched, the smallest device.
[[nodiscard]] report::Table settings_table(const Comparison& comparison);

}  // namespace memscope

// From what the subcommands produce to a Report (memscope/report.hpp) for the HTML page; the
// Report's own JSON form, which `replay --json` embeds, is the library's (report_json.hpp).
//
// Thread safety: pure functions. Errors: report_of_replay() passes the library's errors through.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "memscope/config.hpp"
#include "memscope/metrics.hpp"
#include "memscope/replay.hpp"
#include "memscope/report.hpp"
#include "memscope/trace_events.hpp"
#include "run/run_record.hpp"

namespace memscope::cli {

// Tree RSS, each process's RSS, GPU memory, stage bands, the tree's peak marked; tables of
// processes and stages. Says that RSS over time is sampled and peaks per process are VmHWM.
[[nodiscard]] report::Report report_of_run(const RunRecord& record);

// What one replay of one device of a trace needs to be shown.
struct ReplayReportInput {
  const TorchSnapshot* snapshot = nullptr;  // the trace (times, frames, tags)
  const ReplayPlan* plan = nullptr;         // built from it for `device`
  const ReplayResult* result = nullptr;     // replayed with ReplayOptions::record_series
  std::int64_t device = 0;
  AllocatorConfig config{};  // the settings replayed (for the segment map at the peak)
  std::size_t capacity = 0;  // of the simulated device replayed on
  const Comparison* comparison = nullptr;  // other settings side by side, when given
  const FitResult* fit = nullptr;          // the smallest device, when searched
  std::string source;                      // the trace's file name
};
// Allocated, reserved and live bytes over the trace's time, the peak marked, stage bands from
// the events' tags, the segment map at the peak (the plan replayed again up to it) and the
// largest live allocations at the peak by frame; the settings and fit tables when given.
[[nodiscard]] report::Report report_of_replay(const ReplayReportInput& input);

// Saved metrics (save_metrics JSON): one table per stage, values formatted as log_metrics does.
// The first `max_rows` keys only (the page shows no more: HtmlOptions::max_table_rows), so a
// file of millions of keys does not hold a second copy of them all as rows; each table says how
// many keys it has, a note how many stages were left out.
[[nodiscard]] report::Report report_of_metrics(const Metrics& metrics, const std::string& source,
                                               std::size_t max_rows);

// The version of `memscope estimate --json` this memscope reads (python/memscope/_estimate.py
// writes it: {"format": "memscope-estimate", "version": 1, "estimate": {...}, "max_batch"}).
inline constexpr int kEstimateFormatVersion = 1;

// A saved estimate: its figures, what was live at the peak by category and by module, what
// it does not model. ReportFormatError names the file and the field that is wrong.
[[nodiscard]] report::Report report_of_estimate(const nlohmann::json& json,
                                                const std::string& source);

}  // namespace memscope::cli

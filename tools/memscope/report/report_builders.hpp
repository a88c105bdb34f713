// Saved files that `memscope report` shows, as a Report (memscope/report.hpp) for the HTML page:
// saved metrics and a saved estimate. Each other report is built beside what it reports: a
// run's in run/run_report.hpp, a replay's in the library (memscope/replay_report.hpp), a
// diff's in diff/diff.hpp; the Report's own JSON form is the library's (report_json.hpp).
//
// Thread safety: pure functions. Errors: ReportFormatError from report_of_estimate().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "memscope/metrics.hpp"
#include "memscope/report.hpp"

namespace memscope::cli {

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

// A Report (report.hpp) as one self-contained HTML page: Chart.js (Debian's libjs-chart.js,
// compiled in) draws memory over time with hover values, stage bands and the peak marker; a
// canvas draws the segment map; tables are plain HTML. No network access is needed to open it.
//
// Long series are decimated here, before they reach the page: each series keeps at most
// HtmlOptions::max_points points, the minimum and maximum of every bucket of time (so no peak
// or trough is lost) and always the peak point itself; the page says when it did. Tables are
// bounded the same way: HtmlOptions::max_table_rows rows in all, each table's first ones, the
// page saying what it left out.
//
// For tests and tools the page records what it drew in <pre id="memscope-report-state"> (JSON,
// written after Chart.js rendered and the segment map was drawn):
//   {"rendered": true,
//    "series": [{"name", "points" (drawn, after decimation), "elements" (Chart.js points),
//                "original_points", "sampled", "step", "max": {"t", "bytes"}}...],
//    "peak": {"series", "t", "bytes", "label", "drawn"} or null,
//    "bands": [labels drawn...], "segments": rows drawn, "blocks": blocks drawn,
//    "tables": tables on the page}
// A Report with no series has no chart (and no canvas); the rest of the page is the same.
// Every text is escaped (HTML, and the data's JSON in <script> holds no '<'); names that are
// not valid UTF-8 have the bad bytes replaced by U+FFFD.
//
// Thread safety: pure functions. Errors: write_html() throws ReportWriteError naming the file.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "memscope/report.hpp"

namespace memscope::report {

struct HtmlOptions {
  std::size_t max_points = 4000;  // per series, after decimation
  // Rows of all tables together. Past it a table shows its first rows and says how many it
  // has, and tables with no room left are counted in one line: a metrics file of millions of
  // keys made a page of hundreds of megabytes that no browser opens (issue 44). The text
  // output and --json keep every row.
  std::size_t max_table_rows = 5000;
};

[[nodiscard]] std::string render_html(const Report& report, const HtmlOptions& options = {});
// Renders and writes atomically (a temporary file renamed over `path`).
void write_html(const Report& report, const std::filesystem::path& path,
                const HtmlOptions& options = {});

}  // namespace memscope::report

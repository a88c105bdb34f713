// A Report (report_model.hpp) as one self-contained HTML page: Chart.js (Debian's libjs-chart.js,
// compiled in) draws memory over time with hover values, stage bands and the peak marker; a
// canvas draws the segment map; tables are plain HTML. No network access is needed to open it.
//
// Long series are decimated here, before they reach the page: each series keeps at most
// HtmlOptions::max_points points, the minimum and maximum of every bucket of time (so no peak
// or trough is lost) and always the peak point itself; the page says when it did.
//
// For tests and tools the page records what it drew in <pre id="memscope-report-state"> (JSON:
// the series names and point counts, the peak marker's series and time, the bands) once the
// chart has rendered.
//
// Thread safety: pure functions. Errors: write_html() throws OutputFailure naming the file.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "report_model.hpp"

namespace memscope::cli {

struct HtmlOptions {
  std::size_t max_points = 4000;  // per series, after decimation
};

[[nodiscard]] std::string render_html(const Report& report, const HtmlOptions& options = {});
// Renders and writes atomically (a temporary file renamed over `path`).
void write_html(const Report& report, const std::filesystem::path& path,
                const HtmlOptions& options = {});

}  // namespace memscope::cli

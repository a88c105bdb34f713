// The files an HTML report embeds, compiled into the binary (src/report/html/embed.cmake
// writes their definitions from Debian's chart.min.js and src/report/html/*).
//
// Thread safety: constant data. Errors: none.
#pragma once

#include <string_view>

namespace memscope::report::assets {

[[nodiscard]] std::string_view chart_js();    // Chart.js 3.9 (libjs-chart.js), minified
[[nodiscard]] std::string_view page_html();   // html/page.html: the template
[[nodiscard]] std::string_view report_css();  // html/report.css
[[nodiscard]] std::string_view report_js();   // html/report.js: draws the chart and the map

}  // namespace memscope::report::assets

// Rendering a Report as one self-contained page (report_html.hpp). The page is
// html/page.html with its markers replaced: the text parts (summary, notes, tables) as escaped
// HTML, so they read without script; the chart's and the segment map's data as JSON for
// html/report.js, which draws them with the embedded Chart.js.
#include "memscope/report_html.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/text.hpp"
#include "common/utf8.hpp"
#include "memscope/errors.hpp"
#include "memscope/report_decimate.hpp"
#include "memscope/report_json.hpp"
#include "report/html_assets.hpp"

namespace memscope::report {

namespace {

// Text as HTML: safe in element content and in quoted attribute values, and valid UTF-8 (a
// name from outside may not be; a browser would show the whole page in another encoding).
std::string escape_html(std::string_view raw) {
  std::string storage;
  const std::string_view text = detail::as_valid_utf8(raw, storage);
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// JSON inside <script type="application/json">: no '<' at all, so neither "</script>" nor
// "<!--" in a name can end or confuse the element (json_text() writes '<' as \u003c, which
// means the same in JSON). Bytes that are not UTF-8 in names are escaped, not refused.
std::string json_for_script(const nlohmann::json& json) {
  return json_text(json);
}

// Script text inlined in <script>: a literal "</script" (in a string of the embedded code)
// would end the element early; "<\/script" is the same string to JavaScript.
std::string script_safe(std::string_view js) {
  std::string out;
  out.reserve(js.size());
  for (std::size_t i = 0; i < js.size(); ++i) {
    if (js[i] == '<' && i + 1 < js.size() && js[i + 1] == '/') {
      out += "<\\/";
      ++i;
    } else {
      out += js[i];
    }
  }
  return out;
}

// The finite points of a series (a NaN would stop the chart's scales from working).
void finite_points(const Series& s, std::vector<double>& t, std::vector<double>& bytes) {
  const std::size_t n = std::min(s.t.size(), s.bytes.size());
  t.reserve(n);
  bytes.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isfinite(s.t[i]) && std::isfinite(s.bytes[i])) {
      t.push_back(s.t[i]);
      bytes.push_back(s.bytes[i]);
    }
  }
}

struct ChartData {
  nlohmann::json series = nlohmann::json::array();
  std::vector<std::string> decimated;  // "tree RSS: 1,000,000 points"
};

ChartData chart_data(const Report& report, const HtmlOptions& options) {
  ChartData out;
  for (const Series& s : report.series) {
    std::vector<double> t;
    std::vector<double> bytes;
    finite_points(s, t, bytes);
    DecimatedSeries d = decimate(t, bytes, options.max_points);
    if (d.decimated()) {
      out.decimated.push_back(fmt::format("{} from {} points to {}", s.name,
                                          detail::group_digits(d.original_points),
                                          detail::group_digits(d.t.size())));
    }
    out.series.push_back({{"name", s.name},
                          {"t", std::move(d.t)},
                          {"y", std::move(d.values)},
                          {"sampled", s.sampled},
                          {"step", s.step},
                          {"dashed", s.dashed},
                          {"unit", s.unit},
                          {"original_points", d.original_points}});
  }
  return out;
}

std::string summary_html(const Report& report) {
  if (report.summary.empty()) return {};
  std::string out = "<dl class=\"summary\">\n";
  for (const auto& [key, value] : report.summary) {
    out += fmt::format("<div><dt>{}</dt><dd>{}</dd></div>\n", escape_html(key), escape_html(value));
  }
  return out + "</dl>\n";
}

std::string notes_html(const Report& report) {
  if (report.notes.empty()) return {};
  std::string out = "<ul class=\"notes\">\n";
  for (const std::string& note : report.notes) {
    out += fmt::format("<li>{}</li>\n", escape_html(note));
  }
  return out + "</ul>\n";
}

std::string chart_html(const Report& report, const ChartData& chart, const HtmlOptions& options) {
  if (report.series.empty()) return {};
  std::string what;
  if (!chart.decimated.empty()) {
    // Said on the page: a person comparing with the raw data must know why points are fewer.
    std::string list;
    for (const std::string& d : chart.decimated) list += (list.empty() ? "" : "; ") + d;
    what = fmt::format(
        "<p class=\"decimation\">Decimated for drawing (at most {} points a line; each time "
        "bucket keeps its first, lowest, highest and last point, so every peak is drawn): "
        "{}.</p>",
        detail::group_digits(options.max_points), escape_html(list));
  }
  return fmt::format(
      "<section class=\"card\" id=\"memscope-chart-section\">\n"
      "<div class=\"chart-head\"><h2>Memory over time</h2>{}</div>\n"
      "<div class=\"chart-box\"><canvas id=\"memscope-chart\" role=\"img\" "
      "aria-label=\"memory over time\"></canvas></div>\n</section>\n",
      what);
}

std::string segments_html(const Report& report) {
  if (!report.segment_map) return {};
  const SegmentMap& map = *report.segment_map;
  std::size_t blocks = 0;
  for (const auto& seg : map.segments) blocks += seg.blocks.size();
  return fmt::format(
      "<section class=\"card\" id=\"memscope-segments-section\">\n<h2>{}</h2>\n"
      "<div class=\"legend\"><span><i class=\"swatch\" style=\"background:#0072B2\"></i>"
      "allocated</span><span><i class=\"swatch\" style=\"background:#E69F00\"></i>freed, "
      "waiting for streams</span><span><i class=\"swatch\" style=\"background:#D3DAE3\"></i>"
      "free (cached)</span><span>{} segments, {} blocks; one row per segment, as wide as its "
      "size (consecutive alike segments share a row: &times; N); hover a block for its size "
      "and where it was allocated</span></div>\n"
      "<div class=\"segmap-box\"><canvas id=\"memscope-segments\" role=\"img\" "
      "aria-label=\"segment map\"></canvas><div class=\"tip\" id=\"memscope-segments-tip\" "
      "hidden></div></div>\n</section>\n",
      escape_html(map.title.empty() ? std::string("Segments") : map.title),
      detail::group_digits(map.segments.size()), detail::group_digits(blocks));
}

// The first `shown` rows of `table`; a note says how many it has when that is fewer.
std::string table_html(const Table& table, std::size_t shown, std::size_t page_rows) {
  std::string out = "<section class=\"card\">\n";
  if (!table.title.empty()) out += fmt::format("<h2>{}</h2>\n", escape_html(table.title));
  const auto numeric = [&](std::size_t i) { return i < table.numeric.size() && table.numeric[i]; };
  out += "<div class=\"table-wrap\"><table class=\"data\">\n<thead><tr>";
  for (std::size_t i = 0; i < table.columns.size(); ++i) {
    out += fmt::format("<th scope=\"col\"{}>{}</th>", numeric(i) ? " class=\"num\"" : "",
                       escape_html(table.columns[i]));
  }
  out += "</tr></thead>\n<tbody>\n";
  shown = std::min(shown, table.rows.size());
  for (std::size_t r = 0; r < shown; ++r) {
    const std::vector<std::string>& row = table.rows[r];
    out += "<tr>";
    for (std::size_t i = 0; i < row.size(); ++i) {
      out += fmt::format("<td{}>{}</td>", numeric(i) ? " class=\"num\"" : "", escape_html(row[i]));
    }
    out += "</tr>\n";
  }
  out += "</tbody></table></div>\n";
  if (table.rows.empty()) out += "<p class=\"table-note empty\">(none)</p>\n";
  if (!table.note.empty()) {
    out += fmt::format("<p class=\"table-note\">{}</p>\n", escape_html(table.note));
  }
  if (shown < table.rows.size()) {
    out += fmt::format(
        "<p class=\"table-note cut\">The first {} of {} rows: a page keeps {} table rows in all "
        "(the text output has every row).</p>\n",
        detail::group_digits(shown), detail::group_digits(table.rows.size()),
        detail::group_digits(page_rows));
  }
  return out + "</section>\n";
}

// Every table, HtmlOptions::max_table_rows rows in all; the tables with no room left in one line.
std::string tables_html(const std::vector<Table>& tables, std::size_t max_rows) {
  std::string out;
  std::size_t room = max_rows;
  std::size_t left_tables = 0;
  std::size_t left_rows = 0;
  for (const Table& t : tables) {
    if (room == 0 && !t.rows.empty()) {
      ++left_tables;
      left_rows += t.rows.size();
      continue;
    }
    const std::size_t shown = std::min(room, t.rows.size());
    out += table_html(t, shown, max_rows);
    room -= shown;
  }
  if (left_tables > 0) {
    out += fmt::format(
        "<section class=\"card\"><p class=\"table-note cut\">{} more tables with {} rows are not "
        "on this page: it keeps {} table rows in all (the text output has every row).</p>"
        "</section>\n",
        detail::group_digits(left_tables), detail::group_digits(left_rows),
        detail::group_digits(max_rows));
  }
  return out;
}

// Replaces each <!--memscope:NAME--> of the template in one pass, so text put in never has
// its own markers replaced.
std::string fill(std::string_view page,
                 const std::vector<std::pair<std::string_view, std::string>>& parts) {
  static constexpr std::string_view kOpen = "<!--memscope:";
  std::string out;
  std::size_t at = 0;
  while (true) {
    const std::size_t open = page.find(kOpen, at);
    if (open == std::string_view::npos) break;
    const std::size_t close = page.find("-->", open);
    if (close == std::string_view::npos) break;
    out.append(page.substr(at, open - at));
    const std::string_view name = page.substr(open + kOpen.size(), close - open - kOpen.size());
    for (const auto& [key, value] : parts) {
      if (key == name) out += value;
    }
    at = close + 3;
  }
  out.append(page.substr(at));
  return out;
}

}  // namespace

std::string render_html(const Report& report, const HtmlOptions& options) {
  const ChartData chart = chart_data(report, options);
  nlohmann::json data = {
      {"x_label", report.x_label}, {"y_label", report.y_label}, {"series", chart.series}};
  nlohmann::json bands = nlohmann::json::array();
  for (const Band& b : report.bands) {
    if (!std::isfinite(b.begin) || !std::isfinite(b.end)) continue;
    bands.push_back({{"label", b.label}, {"begin", b.begin}, {"end", b.end}, {"detail", b.detail}});
  }
  data["bands"] = std::move(bands);
  data["peak"] = nullptr;
  if (report.peak && std::isfinite(report.peak->t) && std::isfinite(report.peak->bytes)) {
    data["peak"] = {{"series", report.peak->series},
                    {"t", report.peak->t},
                    {"bytes", report.peak->bytes},
                    {"label", report.peak->label}};
  }
  data["segment_map"] = nullptr;
  if (report.segment_map) data["segment_map"] = segment_map_to_json(*report.segment_map);

  const std::string tables = tables_html(report.tables, options.max_table_rows);
  const std::string title = escape_html(report.title.empty() ? "memscope report" : report.title);
  return fill(assets::page_html(), {{"title", title},
                                    {"subtitle", escape_html(report.subtitle)},
                                    {"css", std::string(assets::report_css())},
                                    {"summary", summary_html(report)},
                                    {"chart", chart_html(report, chart, options)},
                                    {"notes", notes_html(report)},
                                    {"segments", segments_html(report)},
                                    {"tables", tables},
                                    {"data", json_for_script(data)},
                                    {"chartjs", script_safe(assets::chart_js())},
                                    {"js", script_safe(assets::report_js())}});
}

void write_html(const Report& report, const std::filesystem::path& path,
                const HtmlOptions& options) {
  const std::string page = render_html(report, options);
  try {
    detail::write_file_atomically(path, page);
  } catch (const std::exception& e) {
    throw ReportWriteError(
        fmt::format("cannot write the HTML report {}: {} (check that the folder "
                    "exists and is writable)",
                    path.string(), e.what()));
  }
}

}  // namespace memscope::report

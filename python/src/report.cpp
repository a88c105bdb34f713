// memscope.Report: the report layer's model (memscope/report.hpp) and its three renderings
// (text, JSON, one self-contained HTML page) for Python. Python code that has something to
// show (an estimate, an out-of-memory explanation, a growth test) builds a Report of plain
// values and renders it here, so the terminal, the saved JSON and the page are the ones the
// memscope command prints: nothing is formatted twice. The segment map is not bound (no Python
// producer has one); a Report read from JSON keeps it.
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "memscope/atomic_file.hpp"
#include "memscope/errors.hpp"
#include "memscope/report.hpp"
#include "memscope/report_html.hpp"
#include "memscope/report_json.hpp"
#include "memscope/report_text.hpp"

namespace memscope::python {
namespace {

using report::Band;
using report::Marker;
using report::Report;
using report::Series;
using report::Table;

using Rows = std::vector<std::vector<std::string>>;

// Every row has one cell per column: render_text() would refuse it later, far from the cause.
void check_rows(const Table& table) {
  for (std::size_t i = 0; i < table.rows.size(); ++i) {
    if (table.rows[i].size() != table.columns.size()) {
      throw nb::value_error(("ReportTable '" + table.title + "': row " + std::to_string(i) +
                             " has " + std::to_string(table.rows[i].size()) + " cells for " +
                             std::to_string(table.columns.size()) + " columns")
                                .c_str());
    }
  }
  if (table.numeric.size() > table.columns.size()) {
    throw nb::value_error(
        ("ReportTable '" + table.title + "': more `numeric` flags than columns").c_str());
  }
}

void check_series(const Series& s) {
  if (s.t.size() != s.bytes.size()) {
    throw nb::value_error(("ReportSeries '" + s.name + "': t has " + std::to_string(s.t.size()) +
                           " points and bytes " + std::to_string(s.bytes.size()))
                              .c_str());
  }
}

void bind_parts(nb::module_& m) {
  nb::class_<Table>(m, "ReportTable",
                    "A table of a Report: cells already formatted, numeric[i] right-aligns "
                    "column i; a table whose columns have no titles prints as key/value lines.")
      .def(
          "__init__",
          [](Table* t, std::string title, std::vector<std::string> columns, Rows rows,
             std::vector<bool> numeric, std::string note) {
            new (t) Table{std::move(title), std::move(columns), std::move(numeric), std::move(rows),
                          std::move(note)};
            check_rows(*t);
          },
          nb::arg("title") = "", nb::arg("columns") = std::vector<std::string>{},
          nb::arg("rows") = Rows{}, nb::arg("numeric") = std::vector<bool>{}, nb::arg("note") = "")
      .def_rw("title", &Table::title)
      .def_rw("columns", &Table::columns)
      .def_rw("numeric", &Table::numeric)
      .def_rw("rows", &Table::rows)
      .def_rw("note", &Table::note)
      .def(
          "to_text", [](const Table& t) { return report::render_text(t); },
          "The grid alone (no title, no note), as the memscope command prints tables.");

  nb::class_<Series>(m, "ReportSeries", "A line on the page's memory-over-time chart.")
      .def(
          "__init__",
          [](Series* s, std::string name, std::vector<double> t, std::vector<double> bytes,
             bool sampled, bool step, std::string unit, bool dashed) {
            new (s) Series{std::move(name), std::move(t), std::move(bytes), sampled, step,
                           std::move(unit), dashed};
            check_series(*s);
          },
          nb::arg("name"), nb::arg("t"), nb::arg("bytes"), nb::arg("sampled") = false,
          nb::arg("step") = false, nb::arg("unit") = "bytes", nb::arg("dashed") = false)
      .def_rw("name", &Series::name)
      .def_rw("t", &Series::t)
      .def_rw("bytes", &Series::bytes)
      .def_rw("sampled", &Series::sampled)
      .def_rw("step", &Series::step)
      .def_rw("unit", &Series::unit)
      .def_rw("dashed", &Series::dashed);

  nb::class_<Band>(m, "ReportBand", "A stage: a shaded band over [begin, end] seconds.")
      .def(nb::init<std::string, double, double, std::string>(), nb::arg("label"), nb::arg("begin"),
           nb::arg("end"), nb::arg("detail") = "")
      .def_rw("label", &Band::label)
      .def_rw("begin", &Band::begin)
      .def_rw("end", &Band::end)
      .def_rw("detail", &Band::detail);

  nb::class_<Marker>(m, "ReportMarker", "The peak: a marker at (t, bytes) on a series.")
      .def(nb::init<std::string, double, double, std::string>(), nb::arg("series"), nb::arg("t"),
           nb::arg("bytes"), nb::arg("label") = "")
      .def_rw("series", &Marker::series)
      .def_rw("t", &Marker::t)
      .def_rw("bytes", &Marker::bytes)
      .def_rw("label", &Marker::label);
}

using Summary = std::vector<std::pair<std::string, std::string>>;

void check_report(const Report& r) {
  for (const Table& t : r.tables) check_rows(t);
  for (const Series& s : r.series) check_series(s);
}

std::string report_json_text(const Report& r, int indent) {
  check_report(r);
  return report::json_text(report::report_to_json(r), indent);
}

}  // namespace

void bind_report(nb::module_& m) {
  bind_parts(m);
  nb::class_<Report>(m, "Report",
                     "What memscope shows, as plain values: a title, key/value summary lines, "
                     "tables, notes and, on the page, a memory-over-time chart. Render it with "
                     "to_text() (the terminal), to_json() (memscope-report JSON, which "
                     "Report.from_json and `memscope report` read back) or to_html() (one "
                     "self-contained page).")
      .def(
          "__init__",
          [](Report* r, std::string title, std::string subtitle, Summary summary,
             std::vector<Table> tables, std::vector<std::string> notes, std::vector<Series> series,
             std::vector<Band> bands, std::optional<Marker> peak) {
            new (r) Report{};
            r->title = std::move(title);
            r->subtitle = std::move(subtitle);
            r->summary = std::move(summary);
            r->tables = std::move(tables);
            r->notes = std::move(notes);
            r->series = std::move(series);
            r->bands = std::move(bands);
            r->peak = std::move(peak);
            check_report(*r);
          },
          nb::arg("title") = "", nb::arg("subtitle") = "", nb::arg("summary") = Summary{},
          nb::arg("tables") = std::vector<Table>{}, nb::arg("notes") = std::vector<std::string>{},
          nb::arg("series") = std::vector<Series>{}, nb::arg("bands") = std::vector<Band>{},
          nb::arg("peak") = nb::none())
      .def_rw("title", &Report::title)
      .def_rw("subtitle", &Report::subtitle)
      .def_rw("summary", &Report::summary,
              "Key/value lines at the top (a list of pairs; assign a new list to change it).")
      .def_rw("x_label", &Report::x_label)
      .def_rw("y_label", &Report::y_label)
      .def_rw("series", &Report::series)
      .def_rw("bands", &Report::bands)
      .def_rw("peak", &Report::peak)
      .def_rw("tables", &Report::tables)
      .def_rw("notes", &Report::notes)
      .def(
          "add_table",
          [](Report& r, Table table) {
            check_rows(table);
            r.tables.push_back(std::move(table));
          },
          nb::arg("table"), "Appends a table (the `tables` property returns copies).")
      .def(
          "add_summary",
          [](Report& r, std::string key, std::string value) {
            r.summary.emplace_back(std::move(key), std::move(value));
          },
          nb::arg("key"), nb::arg("value"))
      .def(
          "add_note", [](Report& r, std::string note) { r.notes.push_back(std::move(note)); },
          nb::arg("note"))
      .def(
          "add_series",
          [](Report& r, Series series) {
            check_series(series);
            r.series.push_back(std::move(series));
          },
          nb::arg("series"))
      .def(
          "to_text",
          [](const Report& r) {
            check_report(r);
            return report::render_text(r);
          },
          "The terminal's form: title, summary, each table with its title and note, notes.")
      .def("to_json", &report_json_text, nb::arg("indent") = -1,
           "{\"format\": \"memscope-report\", \"version\": 1, ...}; indent < 0: compact.")
      .def(
          "to_html",
          [](const Report& r, std::size_t max_points) {
            check_report(r);
            nb::gil_scoped_release unlocked;
            return report::render_html(r, report::HtmlOptions{max_points});
          },
          nb::arg("max_points") = 4000,
          "One self-contained page (no network needed); series decimated to max_points.")
      .def(
          "write_html",
          [](const Report& r, const std::filesystem::path& path, std::size_t max_points) {
            check_report(r);
            nb::gil_scoped_release unlocked;
            report::write_html(r, path, report::HtmlOptions{max_points});
          },
          nb::arg("path"), nb::arg("max_points") = 4000,
          "Writes to_html() atomically (never half a file).")
      .def(
          "write_json",
          [](const Report& r, const std::filesystem::path& path, int indent) {
            std::string text = report_json_text(r, indent);
            text += '\n';
            nb::gil_scoped_release unlocked;
            write_file_atomically(path, text);
          },
          nb::arg("path"), nb::arg("indent") = 2, "Writes to_json() atomically.")
      .def_static(
          "from_json",
          [](const std::string& text, const std::string& source) {
            const nlohmann::json json = report::parse_json_text(text, false);
            if (json.is_discarded()) {
              throw ReportFormatError(source + ": not JSON (a memscope-report file is expected)");
            }
            return report::report_from_json(json, source);
          },
          nb::arg("text"), nb::arg("source") = "<string>",
          "A Report from its to_json() text; ReportFormatError names `source` and the field.")
      .def("__repr__", [](const Report& r) {
        return "<memscope.Report '" + r.title + "': " + std::to_string(r.tables.size()) +
               " tables, " + std::to_string(r.series.size()) + " series>";
      });
}

}  // namespace memscope::python

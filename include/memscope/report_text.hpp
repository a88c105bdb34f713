// The one text renderer of tables: a Table (report.hpp: header, rows, which columns are
// numeric) as aligned text for the terminal; the HTML page renders the same value
// (report_html.hpp), so the terminal and the page show the same cells. Numeric columns are
// right-aligned, text left-aligned, two spaces between columns, trailing spaces trimmed.
// Cells are already formatted (format_bytes...); widths count UTF-8 code points, so "—" and
// "µs" line up. A table's title and note are the caller's to print: only the grid is rendered.
//
// render_text(Report) is the terminal's form of a whole Report: its title and subtitle, the
// summary as aligned key/value lines, each table under its title with its note (a table whose
// columns have no titles prints as key/value lines: no header), then the notes, a blank line
// between parts and none before the first; the series, bands, peak marker and segment map are
// the page's alone.
//
// TextTable builds a Table row by row for the subcommands that print tables.
//
// Thread safety: plain values and pure functions. Errors: render_text() with a row whose
// length is not the number of columns, and TextTable::add_row() with such a row, throw
// std::invalid_argument (a bug in the caller).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "memscope/report.hpp"

namespace memscope::report {

struct TextOptions {
  std::size_t indent = 0;  // spaces before every line
  bool header = true;      // the column titles as the first line
  bool rule = true;        // a line of '-' under the titles (when they are printed)
};

// Every line ended by '\n'. A column missing from `table.numeric` is text.
[[nodiscard]] std::string render_text(const Table& table, const TextOptions& options = {});

// Lines of text, every one ended by '\n', blank lines between the parts.
[[nodiscard]] std::string render_text(const Report& report);

class TextTable {
 public:
  struct Column {
    std::string title;
    bool numeric = false;  // right-aligned
  };

  explicit TextTable(const std::vector<Column>& columns);

  void add_row(std::vector<std::string> cells);
  [[nodiscard]] std::size_t rows() const noexcept { return table_.rows.size(); }
  [[nodiscard]] bool empty() const noexcept { return table_.rows.empty(); }
  // The value built so far: what render() prints, and what a Report's page shows.
  [[nodiscard]] const Table& table() const noexcept { return table_; }

  // render_text() with the titles, their rule and each line indented by `indent` spaces.
  [[nodiscard]] std::string render(std::size_t indent = 0) const;

 private:
  Table table_;
};

// The number of UTF-8 code points in `text` (its width on a terminal, for the text memscope
// prints: no wide or combining characters).
[[nodiscard]] std::size_t display_width(const std::string& text) noexcept;

}  // namespace memscope::report

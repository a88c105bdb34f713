// An aligned text table for the terminal: a header, a rule, rows; numeric columns right-aligned,
// text left-aligned, two spaces between columns. Cells are already formatted (format_bytes...);
// widths count UTF-8 code points, so "—" and "µs" line up. Shared by the subcommands that print
// tables (replay, report, diff; others may reuse it).
//
// Thread safety: a plain value. Errors: add_row() with a row of the wrong length throws
// std::invalid_argument (a bug in the caller).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace memscope::report {

class TextTable {
 public:
  struct Column {
    std::string title;
    bool numeric = false;  // right-aligned
  };

  explicit TextTable(std::vector<Column> columns);

  void add_row(std::vector<std::string> cells);
  [[nodiscard]] std::size_t rows() const noexcept { return rows_.size(); }
  [[nodiscard]] bool empty() const noexcept { return rows_.empty(); }

  // The table, each line indented by `indent` spaces and ended by '\n'; trailing spaces trimmed.
  [[nodiscard]] std::string render(std::size_t indent = 0) const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// The number of UTF-8 code points in `text` (its width on a terminal, for the text memscope
// prints: no wide or combining characters).
[[nodiscard]] std::size_t display_width(const std::string& text) noexcept;

}  // namespace memscope::report

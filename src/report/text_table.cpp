// The one text renderer of tables (report_text.hpp).
#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "memscope/report.hpp"
#include "memscope/report_text.hpp"

namespace memscope::report {

namespace {

void check_row(const std::vector<std::string>& cells, std::size_t columns, const char* who) {
  if (cells.size() != columns) {
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(cells.size()) +
                                " cells for " + std::to_string(columns) + " columns");
  }
}

}  // namespace

std::size_t display_width(const std::string& text) noexcept {
  // Continuation bytes (10xxxxxx) do not start a code point.
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0U) != 0x80U;
  }));
}

std::string render_text(const Table& table, const TextOptions& options) {
  const std::size_t columns = table.columns.size();
  for (const auto& row : table.rows) check_row(row, columns, "render_text");
  std::vector<std::size_t> widths(columns, 0);
  for (std::size_t c = 0; c < columns; ++c) {
    if (options.header) widths[c] = display_width(table.columns[c]);
    for (const auto& row : table.rows) widths[c] = std::max(widths[c], display_width(row[c]));
  }
  std::string out;
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string text(options.indent, ' ');
    for (std::size_t c = 0; c < columns; ++c) {
      const std::string pad(widths[c] - display_width(cells[c]), ' ');
      const bool numeric = c < table.numeric.size() && table.numeric[c];
      if (c > 0) text.append("  ");
      text.append(numeric ? pad + cells[c] : cells[c] + pad);
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out.append(text).push_back('\n');
  };
  if (options.header) {
    line(table.columns);
    if (options.rule) {
      std::vector<std::string> rules;
      rules.reserve(columns);
      for (const std::size_t w : widths) rules.emplace_back(w, '-');
      line(rules);
    }
  }
  for (const auto& row : table.rows) line(row);
  return out;
}

TextTable::TextTable(const std::vector<Column>& columns) {
  for (const Column& c : columns) {
    table_.columns.push_back(c.title);
    table_.numeric.push_back(c.numeric);
  }
}

void TextTable::add_row(std::vector<std::string> cells) {
  check_row(cells, table_.columns.size(), "TextTable::add_row");
  table_.rows.push_back(std::move(cells));
}

std::string TextTable::render(std::size_t indent) const {
  return render_text(table_, TextOptions{.indent = indent});
}

}  // namespace memscope::report

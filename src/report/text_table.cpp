// TextTable (text_table.hpp).
#include "memscope/report_text.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace memscope::report {

std::size_t display_width(const std::string& text) noexcept {
  // Continuation bytes (10xxxxxx) do not start a code point.
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0U) != 0x80U;
  }));
}

TextTable::TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}

void TextTable::add_row(std::vector<std::string> cells) {
  if (cells.size() != columns_.size()) {
    throw std::invalid_argument("TextTable::add_row: " + std::to_string(cells.size()) +
                                " cells for " + std::to_string(columns_.size()) + " columns");
  }
  rows_.push_back(std::move(cells));
}

std::string TextTable::render(std::size_t indent) const {
  std::vector<std::size_t> widths(columns_.size(), 0);
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    widths[c] = display_width(columns_[c].title);
    for (const auto& row : rows_) widths[c] = std::max(widths[c], display_width(row[c]));
  }
  std::string out;
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string text(indent, ' ');
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(widths[c] - display_width(cells[c]), ' ');
      if (c > 0) text.append("  ");
      text.append(columns_[c].numeric ? pad + cells[c] : cells[c] + pad);
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out.append(text).push_back('\n');
  };
  std::vector<std::string> titles;
  std::vector<std::string> rules;
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    titles.push_back(columns_[c].title);
    rules.emplace_back(widths[c], '-');
  }
  line(titles);
  line(rules);
  for (const auto& row : rows_) line(row);
  return out;
}

}  // namespace memscope::report

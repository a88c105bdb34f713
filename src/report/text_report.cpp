// A whole Report as text (report_text.hpp): the terminal's rendering of the value the page
// shows, so `memscope replay X` and `memscope report X.json` print the same lines.
#include <algorithm>
#include <string>

#include "memscope/report.hpp"
#include "memscope/report_text.hpp"

namespace memscope::report {

namespace {

// A table whose columns have no titles is key / value lines: no header, no rule.
bool has_header(const Table& table) {
  return std::any_of(table.columns.begin(), table.columns.end(),
                     [](const std::string& title) { return !title.empty(); });
}

}  // namespace

std::string render_text(const Report& report) {
  std::string out;
  // A blank line between parts, none before the first.
  const auto part = [&out]() -> std::string& {
    if (!out.empty()) out.append("\n");
    return out;
  };
  // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "literal" + string chains.
  if (!report.title.empty()) out.append(report.title).append("\n");
  if (!report.subtitle.empty()) out.append(report.subtitle).append("\n");
  if (!report.summary.empty()) {
    Table summary{"", {"", ""}, {false, false}, {}, ""};
    for (const auto& [key, value] : report.summary) summary.rows.push_back({key, value});
    part().append(render_text(summary, {.indent = 2, .header = false}));
  }
  for (const Table& table : report.tables) {
    part().append(table.title).append(":\n");
    out.append(render_text(table, {.indent = 2, .header = has_header(table)}));
    if (!table.note.empty()) out.append("  (").append(table.note).append(")\n");
  }
  if (!report.notes.empty()) (void)part();
  for (const std::string& note : report.notes) out.append(note).append("\n");
  return out;
}

}  // namespace memscope::report

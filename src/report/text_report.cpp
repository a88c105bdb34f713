// A whole Report as text (report_text.hpp): the terminal's rendering of the value the page
// shows, so `memscope replay X` and `memscope report X.json` print the same lines.
#include <string>

#include "memscope/report.hpp"
#include "memscope/report_text.hpp"

namespace memscope::report {

std::string render_text(const Report& report) {
  std::string out;
  // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "literal" + string chains.
  if (!report.title.empty()) out.append(report.title).append("\n");
  if (!report.subtitle.empty()) out.append(report.subtitle).append("\n");
  if (!report.summary.empty()) {
    Table summary{"", {"", ""}, {false, false}, {}, ""};
    for (const auto& [key, value] : report.summary) summary.rows.push_back({key, value});
    out.append("\n").append(render_text(summary, {.indent = 2, .header = false}));
  }
  for (const Table& table : report.tables) {
    out.append("\n").append(table.title).append(":\n").append(render_text(table, {.indent = 2}));
    if (!table.note.empty()) out.append("  (").append(table.note).append(")\n");
  }
  if (!report.notes.empty()) out += "\n";
  for (const std::string& note : report.notes) out.append(note).append("\n");
  return out;
}

}  // namespace memscope::report

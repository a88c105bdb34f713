// render_text() and TextTable (include/memscope/report_text.hpp): the one text renderer of
// tables, which the command's tables, the replay's figures and the cross-rank table all use.
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "memscope/report.hpp"
#include "memscope/report_text.hpp"

namespace memscope::report {
namespace {

Table sample() {
  Table t;
  t.columns = {"name", "size"};
  t.numeric = {false, true};
  t.rows = {{"µs", "1 B"}, {"longer", "10 GiB"}};
  return t;
}

TEST(RenderText, TitlesRuleAndRowsAlignedByCodePoints) {
  EXPECT_EQ(render_text(sample()),
            "name      size\n"
            "------  ------\n"
            "µs         1 B\n"
            "longer  10 GiB\n");
}

TEST(RenderText, WithoutRuleOrTitlesAndIndented) {
  EXPECT_EQ(render_text(sample(), {.rule = false}),
            "name      size\n"
            "µs         1 B\n"
            "longer  10 GiB\n");
  EXPECT_EQ(render_text(sample(), {.indent = 2, .header = false}),
            "  µs         1 B\n"
            "  longer  10 GiB\n");
}

TEST(RenderText, TextTableIsATableValue) {
  TextTable table({{"name"}, {"size", true}});
  table.add_row({"µs", "1 B"});
  table.add_row({"longer", "10 GiB"});
  EXPECT_EQ(table.table().rows, sample().rows);
  EXPECT_EQ(table.table().numeric, sample().numeric);
  EXPECT_EQ(table.render(), render_text(sample()));
  EXPECT_THROW(table.add_row({"one"}), std::invalid_argument);
  Table bad = sample();
  bad.rows.push_back({"a", "b", "c"});
  EXPECT_THROW((void)render_text(bad), std::invalid_argument);
}

TEST(RenderText, AReportWithoutTitleStartsWithItsFirstTableAndUntitledColumnsPrintNoHeader) {
  Report report;
  report.tables.push_back({"Host", {"", ""}, {false, false}, {{"total", "1 GiB"}}, ""});
  report.tables.push_back(sample());
  report.tables.back().title = "Sizes";
  report.notes.push_back("done");
  EXPECT_EQ(render_text(report),
            "Host:\n"
            "  total  1 GiB\n"
            "\n"
            "Sizes:\n" +
                render_text(sample(), {.indent = 2}) +
                "\n"
                "done\n");
}

}  // namespace
}  // namespace memscope::report

// report_of_run / report_of_metrics (tools/memscope/report/report_builders.hpp) and render_html /
// write_html (html_report.hpp) on Reports built in code.
#include <unistd.h>
#include <cstdint>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cli.hpp"
#include "memscope/errors.hpp"
#include "memscope/metrics.hpp"
#include "memscope/report_html.hpp"
#include "report/report_builders.hpp"
#include "run/run_record.hpp"
#include "run/run_report.hpp"

namespace memscope::cli {
namespace {

constexpr std::int64_t kMiB = 1 << 20;

RunRecord record_with(int processes) {
  RunRecord r;
  r.command = {"python3", "train.py"};
  r.duration = 2.0;
  r.interval = 0.1;
  r.gpu_status = "NVML unavailable: no driver";
  for (int i = 0; i < 20; ++i) {
    r.t.push_back(i * 0.1);
    r.tree_rss.push_back((10 + i) * kMiB);
  }
  r.peak_tree_rss = 29 * kMiB;
  r.peak_tree_rss_t = 1.9;
  for (int p = 0; p < processes; ++p) {
    RunProcess proc;
    proc.pid = 100 + p;
    proc.command = "worker";
    proc.peak_rss = (p + 1) * kMiB;
    proc.peak_rss_source = "VmHWM";
    proc.t = {0.0, 0.1};
    proc.rss = {kMiB, (p + 1) * kMiB};
    proc.exit_code = 0;
    proc.end = 0.2;
    r.processes.push_back(proc);
  }
  RunStage train;
  train.name = "train";
  train.pid = 100;
  train.begin = 1.0;
  train.end = -1.0;  // never ended: the band runs to the end
  train.tree_rss_peak = 29 * kMiB;
  train.metrics = {{"cpu_peaked_delta", 3 * kMiB}};
  r.stages.push_back(train);
  return r;
}

TEST(ReportOfRun, SeriesBandsPeakAndTables) {
  const report::Report report = report_of_run(record_with(3));
  ASSERT_EQ(report.series.size(), 4U);  // tree + 3 processes, no GPU
  EXPECT_EQ(report.series[0].name, "tree RSS (sampled)");
  EXPECT_TRUE(report.series[0].sampled);
  EXPECT_EQ(report.series[1].name, "pid 100 RSS");
  ASSERT_TRUE(report.peak);
  EXPECT_EQ(report.peak->series, "tree RSS (sampled)");
  EXPECT_EQ(report.peak->t, 1.9);
  EXPECT_EQ(report.peak->bytes, 29.0 * kMiB);
  EXPECT_NE(report.peak->label.find("(stage train)"), std::string::npos) << report.peak->label;
  ASSERT_EQ(report.bands.size(), 1U);
  EXPECT_EQ(report.bands[0].end, 2.0);
  EXPECT_NE(report.bands[0].detail.find("never ended"), std::string::npos);
  ASSERT_EQ(report.tables.size(), 2U);
  EXPECT_EQ(report.tables[0].rows.size(), 3U);
  EXPECT_EQ(report.tables[1].rows[0][3], "not ended");  // the terminal's words (issue 28)
  EXPECT_NE(report.tables[1].rows[0][5].find("cpu_peaked_delta 3.00 MiB"), std::string::npos);
  bool sampled_note = false;
  bool gpu_note = false;
  for (const std::string& n : report.notes) {
    sampled_note |=
        n.find("sampled every 100 ms") != std::string::npos && n.find("VmHWM") != std::string::npos;
    gpu_note |= n.find("no driver") != std::string::npos;
  }
  EXPECT_TRUE(sampled_note);
  EXPECT_TRUE(gpu_note);
}

TEST(ReportOfRun, DrawsTheEightLargestProcessesAndSaysSo) {
  const report::Report report = report_of_run(record_with(12));
  ASSERT_EQ(report.series.size(), 9U);  // tree + 8
  // The largest peaks are pids 104..111, drawn in order of appearance.
  EXPECT_EQ(report.series[1].name, "pid 104 RSS");
  EXPECT_EQ(report.series[8].name, "pid 111 RSS");
  EXPECT_EQ(report.tables[0].rows.size(), 12U);  // the table lists all
  bool said = false;
  for (const std::string& n : report.notes) said |= n.find("12 processes") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(ReportOfRun, ManyStagesAreDecimatedOnThePage) {
  // Issue 29.8: 200,000 stage marks made a 48 MB page (a band and a table row each).
  RunRecord r = record_with(1);
  r.stages.clear();
  constexpr int kStages = 200'000;
  for (int i = 0; i < kStages; ++i) {
    RunStage s;
    s.name = "step";
    s.pid = 100;
    s.begin = i * 1e-5;
    s.end = s.begin + 5e-6;
    s.tree_rss_peak = (i == 123'456 ? 1000 : i % 97) * kMiB;  // one stage stands out
    r.stages.push_back(s);
  }
  const report::Report report = report_of_run(r);
  EXPECT_EQ(report.bands.size(), 2000U);
  const report::Table& stages = report.tables.back();
  ASSERT_EQ(stages.title, "Stages");
  EXPECT_EQ(stages.rows.size(), 2000U);
  bool kept_the_highest = false;
  for (const report::Band& b : report.bands)
    kept_the_highest |= b.detail.find("1000.00 MiB") != std::string::npos;
  EXPECT_TRUE(kept_the_highest);
  for (std::size_t i = 1; i < report.bands.size(); ++i) {
    EXPECT_LT(report.bands[i - 1].begin, report.bands[i].begin);  // in time order
  }
  bool said = false;
  for (const std::string& n : report.notes) said |= n.find("200000 stages") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_LT(report::render_html(report).size(), std::size_t{4} << 20);
}

TEST(ReportOfMetrics, OneTablePerStageAndNoChart) {
  const Metrics metrics = {{"train_mem_cpu_alloc_delta", std::int64_t{12 * kMiB}},
                           {"train_runtime", 1.5},
                           {"eval_mem_gpu_alloc_delta", std::int64_t{0}},
                           {"before_init_mem_cpu", std::int64_t{kMiB}}};
  const report::Report report = report_of_metrics(metrics, "train_results.json", 100);
  EXPECT_TRUE(report.series.empty());
  ASSERT_EQ(report.tables.size(), 3U);  // eval, init, train
  EXPECT_EQ(report.tables[0].title, "eval");
  EXPECT_EQ(report.tables[1].title, "init");
  EXPECT_EQ(report.tables[2].title, "train");
  EXPECT_EQ(report.tables[2].rows.size(), 2U);
  const std::string page = report::render_html(report);
  EXPECT_EQ(page.find("<canvas id=\"memscope-chart\""), std::string::npos);
}

// Issue 44.12: a 196 MB metrics file made a 363 MB page. Tables keep at most
// HtmlOptions::max_table_rows rows in all, each its first ones, saying what they left out.
// Costs about 0.1 s.
TEST(RenderHtml, TablesKeepAtMostMaxTableRowsInAll) {
  report::Report report;
  const auto table = [](const std::string& title, std::size_t rows) {
    report::Table t{title, {"key", "value"}, {false, true}, {}, {}};
    for (std::size_t i = 0; i < rows; ++i) t.rows.push_back({title + std::to_string(i), "1"});
    return t;
  };
  report.tables = {table("a", 3), table("b", 20'000), table("c", 10), table("d", 0)};
  report::HtmlOptions options;
  options.max_table_rows = 100;
  const std::string page = report::render_html(report, options);
  std::size_t rows = 0;
  for (std::size_t at = page.find("<tr><td"); at != std::string::npos;
       at = page.find("<tr><td", at + 1)) {
    ++rows;
  }
  EXPECT_EQ(rows, 100U);
  EXPECT_NE(page.find("<td>b96</td>"), std::string::npos);
  EXPECT_EQ(page.find("<td>b97</td>"), std::string::npos);
  EXPECT_NE(page.find("The first 97 of 20,000 rows"), std::string::npos);
  EXPECT_NE(page.find("1 more tables with 10 rows are not on this page"), std::string::npos);
  // The default bound: 200,000 rows make a page of well under a megabyte beside Chart.js.
  report.tables = {table("b", 200'000)};
  const std::size_t empty = report::render_html(report::Report{}).size();
  EXPECT_LT(report::render_html(report).size() - empty, std::size_t{1} << 20);
}

TEST(ReportOfMetrics, KeepsTheFirstKeysThePageShowsAndSaysSo) {
  Metrics metrics;
  for (int i = 0; i < 30; ++i) metrics.emplace("eval_k" + std::to_string(100 + i), std::int64_t{i});
  for (int i = 0; i < 30; ++i)
    metrics.emplace("train_k" + std::to_string(100 + i), std::int64_t{i});
  const report::Report report = report_of_metrics(metrics, "all_results.json", 40);
  ASSERT_EQ(report.tables.size(), 2U);
  EXPECT_EQ(report.tables[0].rows.size(), 30U);
  EXPECT_TRUE(report.tables[0].note.empty());
  EXPECT_EQ(report.tables[1].rows.size(), 10U);
  EXPECT_NE(report.tables[1].note.find("The first 10 of its 30 keys"), std::string::npos);
  ASSERT_EQ(report.notes.size(), 1U);
  EXPECT_NE(report.notes[0].find("the first 40 of 60 keys (2 of 2 stages)"), std::string::npos)
      << report.notes[0];
}

TEST(RenderHtml, EscapesEveryName) {
  report::Report report = report_of_run(record_with(1));
  report.title = "</script><b>x</b>";
  report.series[0].name = "</script><b>y</b>";
  report.tables[0].rows[0][1] = "<img src=x onerror=alert(1)>";
  const std::string page = report::render_html(report);
  EXPECT_EQ(page.find("<b>x</b>"), std::string::npos);
  EXPECT_EQ(page.find("<b>y</b>"), std::string::npos);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_NE(page.find("&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(page.find("\\u003c/script>\\u003cb>y\\u003c/b>"), std::string::npos);
  // Self-contained: Chart.js is in the page and nothing is fetched.
  EXPECT_NE(page.find("Chart.js v3"), std::string::npos);
  EXPECT_EQ(page.find("src=\"http"), std::string::npos);
}

TEST(WriteHtml, WritesAtomicallyAndNamesTheFileOnError) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("memscope-html-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const report::Report report = report_of_run(record_with(1));
  report::write_html(report, dir / "r.html");
  EXPECT_GT(std::filesystem::file_size(dir / "r.html"), 100'000U);  // Chart.js is in it
  const auto missing = dir / "no-such-folder" / "r.html";
  try {
    report::write_html(report, missing);
    ADD_FAILURE() << "wrote into a missing folder";
  } catch (const ReportWriteError& e) {  // the library's (errors.hpp); the command exits 4 on it
    EXPECT_NE(std::string(e.what()).find(missing.string()), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(missing));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace memscope::cli

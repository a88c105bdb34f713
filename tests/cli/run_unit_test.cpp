// The pure parts of `memscope run` that are the command's: RunRecord <-> JSON (run_record.hpp),
// the stage of a moment, short-lived helpers and command shortening (run_summary.hpp). Mark
// lines and the watcher are the library's (tests/tracker/run_marks_test.cpp,
// run_watcher_test.cpp). The command itself is tested end to end in test_run.py.
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "memscope/errors.hpp"
#include "memscope/json_envelope.hpp"
#include "run/run_helpers.hpp"
#include "run/run_record.hpp"
#include "run/run_report.hpp"
#include "run/run_summary.hpp"

namespace memscope::cli {
namespace {

RunRecord sample_record() {
  RunRecord r;
  r.command = {"python", "train.py", "--ünïcode"};
  r.start_unix = 1.7e9;
  r.duration = 2.5;
  r.interval = 0.05;
  r.exit_code = 137;
  r.child_signal = 9;
  r.gpu_status = "nvml";
  r.host_total = std::int64_t{64} << 30;
  r.t = {0.0, 0.05};
  r.tree_rss = {100, 300};
  r.tree_gpu = {0, 7};
  r.gpus.push_back(RunGpu{0, "NVIDIA H200", 1000, {5, 6}});
  RunProcess p;
  p.pid = 42;
  p.ppid = 41;
  p.command = "python train.py";
  p.end = 2.4;
  p.peak_rss = 300;
  p.peak_rss_source = "wait4";
  p.exit_signal = 9;
  p.t = {0.0, 0.05};
  p.rss = {100, 300};
  p.gpu = {0, 7};
  p.peak_gpu = 7;
  r.processes.push_back(p);
  r.marks.push_back(RunMark{0.01, 42, "begin", "train", 100, {}});
  r.marks.push_back(RunMark{0.04, 42, "end", "train", 300, {{"cpu_peaked_delta", 200}}});
  r.stages.push_back(RunStage{"train", 42, 0.01, 0.04, 300, 7, {{"cpu_peaked_delta", 200}}});
  r.peak_tree_rss = 300;
  r.peak_tree_rss_t = 0.05;
  r.notes = {"a note"};
  return r;
}

TEST(RunRecordJson, RoundTripsEveryField) {
  const RunRecord r = sample_record();
  const nlohmann::json json = run_record_to_json(r);
  EXPECT_EQ(json["format"], "memscope-run");
  EXPECT_EQ(json["version"], 1);
  EXPECT_EQ(memscope::report::envelope_kind(json), "run");
  // Through text, as the files go.
  const RunRecord back = run_record_from_json(nlohmann::json::parse(json.dump()), "run.json");
  EXPECT_EQ(run_record_to_json(back), json);
  EXPECT_EQ(back.child_signal, 9);
  EXPECT_FALSE(back.child_exit_code.has_value());
  EXPECT_EQ(back.processes.at(0).exit_signal, 9);
  EXPECT_EQ(back.stages.at(0).metrics.at("cpu_peaked_delta"), 200);
}

std::string error_of(const nlohmann::json& json) {
  try {
    (void)run_record_from_json(json, "run.json");
  } catch (const ReportFormatError& e) {
    return e.what();
  }
  return "";
}

TEST(RunRecordJson, NamesTheFieldThatIsWrong) {
  const nlohmann::json good = run_record_to_json(sample_record());
  nlohmann::json j = good;
  j["processes"][0]["peak_rss"] = "big";
  EXPECT_NE(error_of(j).find("processes[0].peak_rss' must be an integer"), std::string::npos)
      << error_of(j);
  j = good;
  j.erase("duration");
  EXPECT_NE(error_of(j).find("'duration' is missing"), std::string::npos) << error_of(j);
  j = good;
  j["stages"][0]["metrics"]["x"] = 1.5;
  EXPECT_NE(error_of(j).find("stages[0].metrics.x"), std::string::npos) << error_of(j);
  j = good;
  j["tree_rss"].push_back(1);
  EXPECT_NE(error_of(j).find("'tree_rss'"), std::string::npos) << error_of(j);
  j = good;
  j["version"] = 2;
  EXPECT_NE(error_of(j).find("version 2 was written by a newer memscope"), std::string::npos)
      << error_of(j);
  j = good;
  j["format"] = "memscope-replay";
  EXPECT_NE(error_of(j).find("not a memscope run recording"), std::string::npos);
  EXPECT_NE(error_of(nlohmann::json::array()).find("run.json"), std::string::npos);
  j = good;
  j.erase("notes");  // optional: older or hand-made files
  EXPECT_EQ(error_of(j), "");
}

TEST(RunRecordStages, TheStageOfAMomentIsTheInnermostOpenOne) {
  RunRecord record;
  record.duration = 10.0;
  record.stages = {{"train", 7, 1.0, 8.0, -1, -1, {}},
                   {"step", 7, 2.0, 3.0, -1, -1, {}},
                   {"eval", 7, 5.0, -1.0, -1, -1, {}}};  // never ended: lasts to the end
  EXPECT_EQ(stage_at(record, 0.5), nullptr);
  EXPECT_EQ(stage_at(record, 1.5)->name, "train");
  EXPECT_EQ(stage_at(record, 2.5)->name, "step");
  EXPECT_EQ(stage_at(record, 3.5)->name, "train");
  EXPECT_EQ(stage_at(record, 9.5)->name, "eval");
  // The summary names the stage of the tree's peak.
  record.peak_tree_rss = 1 << 20;
  record.peak_tree_rss_t = 2.5;
  EXPECT_NE(format_run_summary(record).find("in stage step (pid 7)"), std::string::npos)
      << format_run_summary(record);
}

// Issue 27: a pyenv shim's helpers (4 to 30 rows of bash, sed, cat) collapse into one row; a
// process that lived long, peaked high, or marked a stage keeps its own. Random records (fixed
// seed) check the rule against a plain reading of it.
TEST(RunSummary, ShortLivedHelpersCollapseIntoOneRow) {
  RunRecord record;
  record.peak_tree_rss = std::int64_t{1} << 30;
  const auto add = [&record](int pid, std::string command, double start, double end,
                             std::int64_t peak) {
    RunProcess p;
    p.pid = pid;
    p.command = std::move(command);
    p.start = start;
    p.end = end;
    p.peak_rss = peak;
    p.peak_rss_source = "sampled";
    p.exit_code = 0;
    record.processes.push_back(std::move(p));
  };
  constexpr std::int64_t kMiB = std::int64_t{1} << 20;
  add(10, "/home/u/.pyenv/shims/python train.py", 0.0, 30.0, 900 * kMiB);  // the command
  add(11, "bash /home/u/.pyenv/libexec/pyenv-version-name", 0.01, 0.05, 3 * kMiB);
  add(12, "/usr/bin/sed -e s/x/y/", 0.02, 0.03, 2 * kMiB);
  add(13, "[cat]", 0.03, 0.04, kMiB);
  add(14, "bash /home/u/.pyenv/libexec/pyenv-exec", 0.04, 0.2, 4 * kMiB);
  add(15, "python worker.py", 0.5, 0.9, 200 * kMiB);  // short, but 20% of the peak
  add(16, "sleep 5", 1.0, 6.0, kMiB);                 // small, but lived 5 s
  add(17, "python stage.py", 2.0, 2.5, 2 * kMiB);     // small and short, but marked a stage
  record.marks.push_back({2.1, 17, "begin", "load", -1, {}});
  const std::vector<bool> helpers = short_lived_helpers(record);
  EXPECT_EQ(helpers, (std::vector<bool>{false, true, true, true, true, false, false, false}));
  const HelperRow row = helper_row(record, helpers);
  EXPECT_EQ(row.count, 4U);
  EXPECT_EQ(row.first, 1U);
  EXPECT_EQ(row.peak_rss, 4 * kMiB);
  EXPECT_EQ(row.command, "4 short-lived helpers: bash × 2, cat × 1, sed × 1");
  const std::string summary = format_run_summary(record);
  EXPECT_NE(summary.find("4 short-lived helpers: bash × 2"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("pyenv-version-name"), std::string::npos) << summary;
  for (const char* kept : {"worker.py", "sleep 5", "stage.py"}) {
    EXPECT_NE(summary.find(kept), std::string::npos) << kept << "\n" << summary;
  }
  // The HTML report's process table has the same one row.
  const report::Report report = report_of_run(record);
  ASSERT_FALSE(report.tables.empty());
  const report::Table& processes = report.tables.front();
  ASSERT_EQ(processes.title, "Processes");
  ASSERT_EQ(processes.rows.size(), 5U);  // the command, the helpers, three kept
  EXPECT_EQ(processes.rows[1][1], row.command);
  // One helper alone is not collapsed.
  record.processes.resize(2);
  EXPECT_EQ(short_lived_helpers(record), (std::vector<bool>{false, false}));

  std::mt19937 random(27);
  for (int round = 0; round < 200; ++round) {
    RunRecord r;
    r.peak_tree_rss = std::int64_t{1} << 30;
    const int n = 1 + static_cast<int>(random() % 12);
    for (int i = 0; i < n; ++i) {
      RunProcess p;
      p.pid = 100 + i;
      p.command = (random() % 2 != 0) ? "bash x" : "sed y";
      p.start = static_cast<double>(random() % 100) / 10;
      p.end = random() % 5 == 0 ? -1.0 : p.start + static_cast<double>(random() % 30) / 20;
      p.peak_rss = static_cast<std::int64_t>(random() % 30) * kMiB;
      r.processes.push_back(std::move(p));
    }
    const std::vector<bool> got = short_lived_helpers(r);
    std::vector<bool> want(r.processes.size(), false);
    std::size_t count = 0;
    for (std::size_t i = 1; i < r.processes.size(); ++i) {
      const RunProcess& p = r.processes[i];
      want[i] = p.end >= 0 && p.end - p.start < 1.0 && p.peak_rss * 100 < r.peak_tree_rss;
      if (want[i]) ++count;
    }
    if (count < 2) want.assign(want.size(), false);
    EXPECT_EQ(got, want) << "round " << round;
  }
}

TEST(RunSummary, ShortensLongCommandsKeepingBothEnds) {
  EXPECT_EQ(shorten_command("python a.py", 48), "python a.py");
  const std::string cut = shorten_command(std::string(100, 'x') + " --seed 7", 20);
  EXPECT_EQ(cut.size(), 20U);
  EXPECT_EQ(cut.substr(0, 10), std::string(10, 'x'));
  EXPECT_NE(cut.find("..."), std::string::npos);
  EXPECT_EQ(cut.substr(cut.size() - 3), "d 7");
}

// Issue 44: `python3 examples/python/demo.py` showed the interpreter's path cut in the middle
// and lost the script. Microseconds.
TEST(RunSummary, ShortensTheProgramsFolderBeforeTheScript) {
  const std::string command = "/root/.pyenv/versions/3.11.7/bin/python3 examples/python/demo.py";
  EXPECT_EQ(shorten_command(command, 48), "python3 examples/python/demo.py");
  const std::string longer = shorten_command(command + " --steps 3 --batch 8 --out /tmp/x", 48);
  EXPECT_EQ(longer.substr(0, 8), "python3 ");
  EXPECT_EQ(longer.substr(longer.size() - 6), "/tmp/x");
  EXPECT_EQ(program_of("/usr/bin/python3 -u train.py"), "python3");
  EXPECT_EQ(program_of("[sed]"), "sed");
}

}  // namespace
}  // namespace memscope::cli

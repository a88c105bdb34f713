// The pure parts of `memscope run`: RunRecord <-> JSON (run_record.hpp), mark lines and stage
// pairing (run_marks.hpp), command shortening (run_summary.hpp), and the watcher's choice of a
// reaped child's peak (run_watch.hpp) on a real forked child. The command itself is tested end
// to end in test_run.py.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "probes/proc_files.hpp"
#include "report/report_builders.hpp"
#include "run/process_tree.hpp"
#include "run/run_helpers.hpp"
#include "run/run_marks.hpp"
#include "run/run_record.hpp"
#include "run/run_summary.hpp"
#include "run/run_watch.hpp"

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
  EXPECT_TRUE(is_run_record(json));
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
  } catch (const InputFailure& e) {
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
  EXPECT_NE(error_of(j).find("version 2"), std::string::npos) << error_of(j);
  j = good;
  j["format"] = "memscope-replay";
  EXPECT_NE(error_of(j).find("not a memscope run recording"), std::string::npos);
  EXPECT_NE(error_of(nlohmann::json::array()).find("run.json"), std::string::npos);
  j = good;
  j.erase("notes");  // optional: older or hand-made files
  EXPECT_EQ(error_of(j), "");
}

TEST(RunMarks, ParsesTheLibrarysLines) {
  const std::optional<RunMark> mark = parse_mark_line(
      R"({"memscope_mark":1,"kind":"end","stage":"train","pid":7,"t_ns":3500000000,"hwm":4096,)"
      R"("metrics":{"cpu_peaked_delta":1024,"gpu_alloc_delta":-5}})",
      1'000'000'000);
  ASSERT_TRUE(mark.has_value());
  EXPECT_EQ(mark->kind, "end");
  EXPECT_EQ(mark->stage, "train");
  EXPECT_EQ(mark->pid, 7);
  EXPECT_DOUBLE_EQ(mark->t, 2.5);
  EXPECT_EQ(mark->hwm, 4096);
  EXPECT_EQ(mark->metrics.at("gpu_alloc_delta"), -5);
}

TEST(RunMarks, RefusesWhatIsNotAMark) {
  for (const char* line : {"hello", "{}", "[1,2]",
                           R"({"memscope_mark":2,"kind":"begin","stage":"a","pid":1,"t_ns":1})",
                           R"({"memscope_mark":1,"kind":"middle","stage":"a","pid":1,"t_ns":1})",
                           R"({"memscope_mark":1,"kind":"begin","stage":3,"pid":1,"t_ns":1})",
                           R"({"memscope_mark":1,"kind":"begin","stage":"a","pid":-1,"t_ns":1})",
                           R"({"memscope_mark":1,"kind":"begin","stage":"a","pid":1})",
                           R"({"memscope_mark":1,"kind":"begin","stage":"a","pid":1,"t_ns":1)"}) {
    EXPECT_FALSE(parse_mark_line(line, 0).has_value()) << line;
  }
}

TEST(RunMarks, RefusesAMarkTimedBeforeTheRun) {
  // Issue 29.8: t_ns -1 became a stage at -4532 s; INT64_MIN overflowed the subtraction.
  const std::int64_t start = 4'532'000'000'000;
  for (const char* t_ns : {"-1", "0", "4531999999999", "-9223372036854775808"}) {
    const std::string line = std::string(R"({"memscope_mark":1,"kind":"begin","stage":"a",)") +
                             R"("pid":1,"t_ns":)" + t_ns + "}";
    EXPECT_FALSE(parse_mark_line(line, start).has_value()) << line;
  }
  const std::optional<RunMark> at_start = parse_mark_line(
      R"({"memscope_mark":1,"kind":"begin","stage":"a","pid":1,"t_ns":4532000000000})", start);
  ASSERT_TRUE(at_start.has_value());
  EXPECT_DOUBLE_EQ(at_start->t, 0.0);
}

TEST(RunMarks, PairsStagesPerProcessInnermostFirst) {
  const std::vector<RunMark> marks{
      {1.0, 5, "begin", "step", -1, {}},       {1.5, 6, "begin", "step", -1, {}},
      {2.0, 5, "begin", "step", -1, {}},       {3.0, 5, "end", "step", -1, {{"m", 1}}},
      {4.0, 5, "end", "step", -1, {{"m", 2}}}, {4.5, 7, "end", "lonely", -1, {}}};
  const std::vector<double> t{0.5, 1.2, 2.5, 3.5, 4.2};
  const std::vector<std::int64_t> rss{10, 20, 50, 30, 40};
  const std::vector<RunStage> stages = pair_stages(marks, t, rss, {}, 5.0);
  ASSERT_EQ(stages.size(), 3U);  // an end without a begin makes no stage
  EXPECT_EQ(stages[0].pid, 5);
  EXPECT_DOUBLE_EQ(stages[0].end, 4.0);  // the outer step
  EXPECT_EQ(stages[0].metrics.at("m"), 2);
  EXPECT_EQ(stages[0].tree_rss_peak, 50);
  EXPECT_EQ(stages[1].pid, 6);
  EXPECT_DOUBLE_EQ(stages[1].end, -1.0);  // never ended: its peak runs to the end of the run
  EXPECT_EQ(stages[1].tree_rss_peak, 50);
  EXPECT_DOUBLE_EQ(stages[2].begin, 2.0);
  EXPECT_EQ(stages[2].tree_rss_peak, 50);
  EXPECT_EQ(stages[2].gpu_peak, -1);  // no GPU samples
}

TEST(RunMarks, ReaderJoinsLinesSplitAcrossReadsAndCountsJunk) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_NONBLOCK), 0);
  MarkReader reader(fds[0], 0);
  const std::string line =
      R"({"memscope_mark":1,"kind":"begin","stage":"a","pid":1,"t_ns":1000000000})";
  std::vector<RunMark> out;
  ASSERT_EQ(::write(fds[1], line.data(), 10), 10);
  reader.drain(out);  // half a line: nothing yet
  EXPECT_TRUE(out.empty());
  const std::string rest = line.substr(10) + "\nnot a mark\n";
  ASSERT_EQ(::write(fds[1], rest.data(), rest.size()), static_cast<ssize_t>(rest.size()));
  reader.drain(out);
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out[0].stage, "a");
  EXPECT_DOUBLE_EQ(out[0].t, 1.0);
  EXPECT_EQ(reader.malformed(), 1U);
  ::close(fds[0]);
  ::close(fds[1]);
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

// A child of this test that touches `bytes` and waits for a byte on a pipe before it exits; the
// watcher samples its VmHWM while it waits. Returns the watcher's record after it was reaped with
// its real rusage, ru_maxrss lowered by `lower_by` bytes to stand for the kernel counters' drift.
RunProcess reaped_child_peak(std::int64_t bytes, std::int64_t lower_by, std::int64_t* sampled) {
  int go[2];
  int ready[2];
  EXPECT_EQ(::pipe(go), 0);
  EXPECT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // volatile: the compiler may not drop the stores to memory nobody reads.
    volatile char* touched = static_cast<char*>(std::malloc(static_cast<std::size_t>(bytes)));
    for (std::int64_t i = 0; touched != nullptr && i < bytes; i += 4096) touched[i] = 1;
    char byte = 0;
    (void)!::write(ready[1], &byte, 1);
    (void)!::read(go[0], &byte, 1);
    ::_exit(touched == nullptr ? 1 : 0);
  }
  char byte = 0;
  EXPECT_EQ(::read(ready[0], &byte, 1), 1);
  RunWatcher watcher(static_cast<int>(::getpid()), 0.05, /*watch_gpu=*/false);
  watcher.set_start(0);
  watcher.sample(1'000'000);
  EXPECT_EQ(::write(go[1], &byte, 1), 1);
  siginfo_t info{};
  EXPECT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);
  const std::optional<bool> reaped_a_child = read_reaped_a_child(static_cast<int>(pid));
  EXPECT_EQ(reaped_a_child, std::optional<bool>(false));  // it forked nothing
  int status = 0;
  rusage usage{};
  EXPECT_EQ(::wait4(pid, &status, 0, &usage), pid);
  usage.ru_maxrss -= lower_by / 1024;
  watcher.reaped(static_cast<int>(pid),
                 {.start_ticks = 0, .command = "", .reaped_a_child = reaped_a_child}, status, usage,
                 2'000'000);
  for (int fd : {go[0], go[1], ready[0], ready[1]}) ::close(fd);
  const RunRecord record = watcher.finish(3'000'000, {"child"}, 0.0, 0);
  for (const RunProcess& process : record.processes) {
    if (process.pid != pid) continue;
    *sampled = process.t.empty() ? -1 : process.peak_rss;
    return process;
  }
  ADD_FAILURE() << "the child " << pid << " is not in the record";
  return {};
}

// Regression (CI's ASan step): a VmHWM sampled a few pages above the reaped child's ru_maxrss
// (per-CPU RSS counter drift) made the record call the peak "sampled" although wait4's final
// figure was there.
TEST(RunWatcherPeaks, WaitFourStandsAgainstAnEarlierReadingWithinTheCountersDrift) {
  std::int64_t sampled = -1;
  const RunProcess child =
      reaped_child_peak(std::int64_t{16} << 20, std::int64_t{4} * 4096, &sampled);
  EXPECT_EQ(child.peak_rss_source, "wait4");
  EXPECT_GT(child.peak_rss, std::int64_t{16} << 20);
  EXPECT_EQ(child.exit_code, 0);
}

// Beyond the drift an earlier reading is a real, higher peak and wins, and says it was sampled.
TEST(RunWatcherPeaks, AHigherReadingBeyondTheDriftWins) {
  std::int64_t sampled = -1;
  const std::int64_t lower = 2 * detail::rss_counter_slack(1) + (std::int64_t{8} << 20);
  const RunProcess child = reaped_child_peak(std::int64_t{16} << 20, lower, &sampled);
  EXPECT_EQ(child.peak_rss_source, "sampled");
  EXPECT_GT(child.peak_rss, std::int64_t{16} << 20);
}

// Two pipes between a test and the child it forks: the child says it is ready and waits; the
// test goes on when it is, and lets the child go.
class Handshake {
 public:
  Handshake() {
    if (::pipe(ready_) != 0 || ::pipe(go_) != 0) throw std::runtime_error("pipe failed");
  }
  Handshake(const Handshake&) = delete;
  Handshake& operator=(const Handshake&) = delete;
  ~Handshake() {
    for (const int fd : {ready_[0], ready_[1], go_[0], go_[1]}) ::close(fd);
  }
  // In the child.
  void ready_then_wait() const {
    char byte = 0;
    (void)!::write(ready_[1], &byte, 1);
    (void)!::read(go_[0], &byte, 1);
  }
  // In the test.
  [[nodiscard]] bool wait_ready() const {
    char byte = 0;
    return ::read(ready_[0], &byte, 1) == 1;
  }
  [[nodiscard]] bool go() const {
    const char byte = 0;
    return ::write(go_[1], &byte, 1) == 1;
  }

 private:
  int ready_[2] = {-1, -1};
  int go_[2] = {-1, -1};
};

// A child of this test that forks a grandchild touching `bytes`, reaps it, and waits on the
// handshake; the watcher samples the child (or not), then reaps it as `memscope run` does.
struct ReapedParent {
  RunProcess process;
  std::int64_t wait4_maxrss = -1;
  std::optional<bool> reaped_a_child;
};
ReapedParent reaped_parent_of_a_fat_child(std::int64_t bytes, bool sample_it) {
  const Handshake handshake;
  const pid_t pid = ::fork();
  if (pid == 0) {
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      volatile char* touched = static_cast<char*>(std::malloc(static_cast<std::size_t>(bytes)));
      for (std::int64_t i = 0; touched != nullptr && i < bytes; i += 4096) touched[i] = 1;
      ::_exit(touched == nullptr ? 1 : 0);
    }
    int status = 0;
    ::waitpid(grandchild, &status, 0);
    handshake.ready_then_wait();
    ::_exit(0);
  }
  ReapedParent out;
  EXPECT_TRUE(handshake.wait_ready());
  RunWatcher watcher(static_cast<int>(::getpid()), 0.05, /*watch_gpu=*/false);
  watcher.set_start(0);
  if (sample_it) watcher.sample(1'000'000);
  EXPECT_TRUE(handshake.go());
  siginfo_t info{};
  EXPECT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);
  RunWatcher::Zombie zombie{read_start_ticks(static_cast<int>(pid)).value_or(0), "parent",
                            read_reaped_a_child(static_cast<int>(pid))};
  out.reaped_a_child = zombie.reaped_a_child;
  int status = 0;
  rusage usage{};
  EXPECT_EQ(::wait4(pid, &status, 0, &usage), pid);
  out.wait4_maxrss = static_cast<std::int64_t>(usage.ru_maxrss) * 1024;
  watcher.reaped(static_cast<int>(pid), zombie, status, usage, 2'000'000);
  const RunRecord record = watcher.finish(3'000'000, {"parent"}, 0.0, 0);
  for (const RunProcess& process : record.processes) {
    if (process.pid == pid) out.process = process;
  }
  return out;
}

// Regression (issue 27): `sh -c 'sort ... | wc -c'` listed sh at sort's 127 MiB as "wait4", the
// exact figure, when sort lived between two samples: wait4's ru_maxrss holds the peaks of the
// children a process reaped. Such a process gets its own sampled VmHWM.
TEST(RunWatcherPeaks, AParentsWaitFourFigureIsNotTakenForItsOwn) {
  constexpr std::int64_t kFat = std::int64_t{64} << 20;
  const ReapedParent parent = reaped_parent_of_a_fat_child(kFat, /*sample_it=*/true);
  EXPECT_EQ(parent.reaped_a_child, std::optional<bool>(true));  // the zombie's cminflt says so
  EXPECT_GE(parent.wait4_maxrss, kFat);                         // the grandchild's peak
  EXPECT_EQ(parent.process.peak_rss_source, "sampled");
  EXPECT_LT(parent.process.peak_rss, parent.wait4_maxrss - kFat / 2);
}

// Never sampled, the parent has only wait4's figure, and says what it is.
TEST(RunWatcherPeaks, AnUnsampledParentsWaitFourFigureIsLabelledForWhatItIs) {
  constexpr std::int64_t kFat = std::int64_t{64} << 20;
  const ReapedParent parent = reaped_parent_of_a_fat_child(kFat, /*sample_it=*/false);
  EXPECT_EQ(parent.process.peak_rss_source, kWait4OrChild);
  EXPECT_EQ(parent.process.peak_rss, parent.wait4_maxrss);
}

// Regression (CI, torchrun under load): a sample taken between a launcher's fork and its exec
// saw the child with the launcher's pages (550 MB of torch) and the record gave that peak to the
// 280 MB rank the child became. A new program's peak starts at its exec, also when its name does
// not change (python starting python): here the child keeps this test's name.
TEST(RunWatcherPeaks, APeakBeforeTheExecIsNotTheNewPrograms) {
  constexpr std::int64_t kFat = std::int64_t{96} << 20;
  // The parent is fat, so the forked child is too until it execs.
  const std::unique_ptr<char[]> fat_pages(new char[static_cast<std::size_t>(kFat)]);
  volatile char* fat = fat_pages.get();
  for (std::int64_t i = 0; i < kFat; i += 4096) fat[i] = 1;
  // sleep(1), under a link with this process's own name: the exec changes no name.
  const std::optional<std::string> comm = read_proc_file(static_cast<int>(::getpid()), "comm");
  ASSERT_TRUE(comm.has_value());
  const std::string name = comm->substr(0, comm->find('\n'));
  char dir_template[] = "/tmp/memscope-exec-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string link = std::string(dir_template) + "/" + name;
  ASSERT_EQ(::symlink("/bin/sleep", link.c_str()), 0);
  const Handshake handshake;
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    handshake.ready_then_wait();
    ::execl(link.c_str(), link.c_str(), "5", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  EXPECT_TRUE(handshake.wait_ready());
  RunWatcher watcher(static_cast<int>(::getpid()), 0.05, /*watch_gpu=*/false);
  watcher.set_start(0);
  watcher.sample(1'000'000);  // before the exec: the child holds the parent's pages
  EXPECT_TRUE(handshake.go());
  // Wait (bounded) until the child runs sleep: its VmHWM restarts small, and its arguments are
  // in place (inside the exec the new image has none yet: CI's TSan run sampled it there).
  std::int64_t hwm = -1;
  bool has_arguments = false;
  for (int i = 0; i < 500; ++i) {
    const std::optional<TreeProcess> p = read_process(static_cast<int>(pid));
    hwm = p ? p->hwm : -1;
    has_arguments =
        read_arguments(static_cast<int>(pid)).value_or("").find(" 5") != std::string::npos;
    if (hwm >= 0 && hwm < kFat / 2 && has_arguments) break;
    ::usleep(10'000);
  }
  ASSERT_GE(hwm, 0);
  ASSERT_LT(hwm, kFat / 2) << "the child did not exec within 5 s";
  ASSERT_TRUE(has_arguments) << "the child's arguments did not show within 5 s";
  watcher.sample(2'000'000);  // after it
  ::kill(pid, SIGKILL);
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);  // not reaped by the watcher: no wait4 figure
  ::unlink(link.c_str());
  ::rmdir(dir_template);
  const RunRecord record = watcher.finish(3'000'000, {"child"}, 0.0, 0);
  bool found = false;
  for (const RunProcess& process : record.processes) {
    if (process.pid != pid) continue;
    found = true;
    ASSERT_EQ(process.rss.size(), 2U);
    EXPECT_GE(process.rss[0], kFat / 2);  // the fork was sampled, with the parent's pages
    EXPECT_LT(process.peak_rss, kFat / 2) << process.peak_rss_source;
    EXPECT_NE(process.command.find(name + " 5"), std::string::npos) << process.command;
  }
  EXPECT_TRUE(found) << "the child " << pid << " is not in the record";
}

// Regression (CI, TSan): a sample inside an exec, after the new image but before its arguments,
// read an empty command line, and the process kept "[name]" as its command for good. A command
// line read empty is read again at the next sample. Here the child empties its own arguments
// and then writes new ones, as setproctitle does.
TEST(RunWatcherCommands, AnEmptyCommandLineIsReadAgainAtTheNextSample) {
  const Handshake handshake;
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Where this process's arguments live: /proc/self/stat field 48, and cmdline's length.
    const std::optional<TreeProcess> self = read_process(static_cast<int>(::getpid()));
    const std::optional<std::string> arguments =
        read_proc_file(static_cast<int>(::getpid()), "cmdline");
    if (!self || self->image == 0 || !arguments || arguments->size() < 8) ::_exit(2);
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the kernel gives the address as a number
    char* area = reinterpret_cast<char*>(self->image);
    std::memset(area, 0, arguments->size());
    handshake.ready_then_wait();
    std::memcpy(area, "renamed", sizeof "renamed");  // the area is long enough: checked above
    handshake.ready_then_wait();
    ::_exit(0);
  }
  // A failed assertion leaves the test with the child waiting: end it.
  struct KillOnReturn {
    pid_t pid;
    ~KillOnReturn() {
      if (pid > 0 && ::kill(pid, SIGKILL) == 0) ::waitpid(pid, nullptr, 0);
    }
  } killer{pid};
  RunWatcher watcher(static_cast<int>(::getpid()), 0.05, /*watch_gpu=*/false);
  watcher.set_start(0);
  ASSERT_TRUE(handshake.wait_ready());
  EXPECT_EQ(read_arguments(static_cast<int>(pid)), std::nullopt);
  watcher.sample(1'000'000);  // its command line is empty
  EXPECT_TRUE(handshake.go());
  ASSERT_TRUE(handshake.wait_ready());
  watcher.sample(2'000'000);  // now it has one
  EXPECT_TRUE(handshake.go());
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  killer.pid = 0;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const RunRecord record = watcher.finish(3'000'000, {"child"}, 0.0, 0);
  bool found = false;
  for (const RunProcess& process : record.processes) {
    if (process.pid != pid) continue;
    found = true;
    EXPECT_EQ(process.command, "renamed");
  }
  EXPECT_TRUE(found) << "the child " << pid << " is not in the record";
}

}  // namespace
}  // namespace memscope::cli

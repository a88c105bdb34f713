// Stage marks read back by `memscope run` (include/memscope/run_marks.hpp): mark lines, the
// reader of the marks pipe, and stages paired from marks. The writing side is tested in
// stage_marks_test.cpp; the command end to end in tests/cli/test_marks.py.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "memscope/run_marks.hpp"

namespace memscope {
namespace {

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

}  // namespace
}  // namespace memscope

// replay_report() (memscope/replay_report.hpp) with the trace, on the repository's real trace: the
// segment map at the peak is the allocator's state there (its segments add up to the peak
// reserved bytes), the marker sits at the peak op's time, and the lines are the replay's.
#include <cstddef>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "memscope/replay.hpp"
#include "memscope/replay_report.hpp"
#include "memscope/trace.hpp"
#include "trace_corpus.hpp"

namespace memscope {
namespace {

TEST(ReportOfReplay, RealTraceSegmentsAtThePeakAddUpToPeakReserved) {
  MEMSCOPE_TRACE_OR_SKIP(real, corpus::kSmallTrainStep);
  const TorchSnapshot snapshot = read_trace_file(real);
  const ReplayPlan plan = build_replay_plan(snapshot, 0);
  ReplayOptions options;
  options.record_series = true;
  options.peak_layout = true;  // the segment map
  options.capacity = 80 * GiB;
  ReplayResult result = replay(plan, options);
  explain_with_trace(snapshot, plan, result);
  ASSERT_TRUE(result.peak.happened());

  ReplayReportInput input;
  input.snapshot = &snapshot;
  input.plan = &plan;
  input.result = &result;
  input.source = "real.pickle";
  const report::Report report = replay_report(input);

  ASSERT_EQ(report.series.size(), 3U);
  EXPECT_EQ(report.series[0].name, "reserved");
  EXPECT_EQ(report.series[0].t.size(), plan.ops.size());
  EXPECT_TRUE(report.series[0].step);
  ASSERT_TRUE(report.peak);
  EXPECT_EQ(report.peak->series, "reserved");
  EXPECT_EQ(report.peak->bytes, static_cast<double>(result.peak_reserved));
  // The marker is on the line: the reserved series has that value at that time.
  const auto at = static_cast<std::size_t>(result.peak.op);
  EXPECT_EQ(report.series[0].t[at], report.peak->t);
  EXPECT_EQ(report.series[0].bytes[at], report.peak->bytes);

  ASSERT_TRUE(report.segment_map);
  std::uint64_t reserved = 0;
  std::size_t with_site = 0;
  std::size_t allocated_blocks = 0;
  for (const auto& seg : report.segment_map->segments) {
    reserved += seg.size;
    std::uint64_t covered = 0;
    for (const auto& b : seg.blocks) {
      EXPECT_EQ(b.offset, covered);  // blocks cover the segment in order
      covered += b.size;
      if (b.state == "active_allocated") {
        ++allocated_blocks;
        if (b.label.find(".py:") != std::string::npos) ++with_site;
      }
    }
    EXPECT_EQ(covered, seg.size);
  }
  EXPECT_EQ(reserved, static_cast<std::uint64_t>(result.peak_reserved));
  EXPECT_GT(with_site, allocated_blocks / 2);  // most blocks name the code that allocated them
  ASSERT_FALSE(report.tables.empty());
  // What was live at peak live, then at peak reserved (one table, labelled both, when they
  // are the same moment, as on this trace), numbered by event as the text report numbers it.
  const bool same = result.peak_live.op == result.peak.op;
  ASSERT_EQ(report.tables.size(), same ? 1U : 2U);
  const std::string first =
      same ? "Live at peak live and peak reserved, event " : "Live at peak live, event ";
  EXPECT_EQ(report.tables[0].title.rfind(first + format_count(result.peak_live.event), 0), 0U)
      << report.tables[0].title;
  EXPECT_EQ(report.tables[0].rows.size(), result.at_peak_live.top_sites.size());
  if (!same) {
    EXPECT_EQ(report.tables[1].title.rfind(
                  "Live at peak reserved, event " + format_count(result.peak.event), 0),
              0U)
        << report.tables[1].title;
  }
  EXPECT_EQ(report.segment_map->title.rfind(
                "Segments at peak reserved, event " + format_count(result.peak.event), 0),
            0U)
      << report.segment_map->title;
}

}  // namespace
}  // namespace memscope

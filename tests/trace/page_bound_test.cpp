// The page bound (bench/page_bound.hpp) that the corpus table sets beside each expandable
// figure: hand-checked on a small plan, and a true lower bound: no replay through memscope,
// with or without expandable segments, under any recycling policy, reserves less.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "memscope/replay.hpp"
#include "memscope/units.hpp"
#include "multi_stream_plan.hpp"
#include "page_bound.hpp"
#include "steady_state.hpp"

namespace memscope {
namespace {

// Stream 1: 1.5 MiB (large pool) and 4 KiB (small pool); stream 2: 3 MiB, after stream 1's
// large block is freed. Pages of 2 MiB: at most 2 + 2 (stream 1) and then 2 + 4 (stream 1's
// small page and stream 2's two): 6 MiB over a live peak of 3 MiB + 4 KiB.
TEST(PageBound, CountsWholePagesPerStreamAndPool) {
  bench::multi_stream_detail::PlanBuilder b;
  const std::uint64_t large = b.alloc(3 * MiB / 2, 1);
  (void)b.alloc(4096, 1);
  b.free(large, 1);
  (void)b.alloc(3 * MiB, 2);
  const ReplayPlan plan = b.done();
  ASSERT_EQ(plan.peak_live, 3 * MiB + 4096);
  EXPECT_DOUBLE_EQ(bench::page_bound(plan),
                   static_cast<double>(6 * MiB) / static_cast<double>(3 * MiB + 4096));
  EXPECT_DOUBLE_EQ(bench::page_bound(plan, 4096), 1.0);
}

TEST(PageBound, NoReplayReservesLessOnSyntheticSteps) {
  for (const std::uint64_t seed : {1U, 2U, 3U, 4U, 5U, 6U}) {
    const ReplayPlan plan = bench::three_stream_training_step(seed);
    const double bound = bench::page_bound(plan);
    EXPECT_GT(bound, 1.0);
    for (const char* config : {"", "expandable_segments:true,expandable_segments_recycling:never",
                               "expandable_segments:true,expandable_segments_recycling:above_peak",
                               "expandable_segments:true,expandable_segments_recycling:always"}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", '" + config + "'");
      const bench::SteadyState s = bench::memscope_steady_state(plan, config, 2);
      for (const double ratio : s.ratios) EXPECT_GE(ratio, bound);
    }
  }
}

}  // namespace
}  // namespace memscope

// Several streams in the steady state (issue 25): the corpus of real traces has one stream each,
// so made-up training steps on three streams (bench/multi_stream_plan.hpp: compute, prefetch,
// gradient buckets) are replayed 10 times back to back, memscope's default rules beside the
// model of PyTorch's (bench/torch_rules.hpp). Each stream has its own pools in both, and free
// memory of one stream serves another only once the cache is released.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>

#include "memscope/replay.hpp"
#include "multi_stream_plan.hpp"
#include "steady_state.hpp"
#include "steady_state_checks.hpp"
#include "test_scale.hpp"

namespace memscope {
namespace {

TEST(MultiStreamSteadyState, PlansUseThreeStreamsAndBalance) {
  const ReplayPlan plan = bench::three_stream_training_step(7);
  std::set<StreamId> streams;
  std::int64_t live = 0;
  for (const ReplayOp& op : plan.ops) {
    streams.insert(op.stream);
    live += op.is_free ? -static_cast<std::int64_t>(op.size) : static_cast<std::int64_t>(op.size);
    ASSERT_GE(live, 0);
  }
  EXPECT_EQ(streams.size(), 3U);
  EXPECT_EQ(static_cast<std::size_t>(live), plan.live_at_end);
  EXPECT_GT(plan.peak_live, plan.live_at_end);
}

TEST(MultiStreamSteadyState, DefaultRulesNeverReserveMoreThanPyTorchs) {
  for (const std::uint64_t seed : {1U, 2U, 3U, 4U, 5U, 6U}) {
    SCOPED_TRACE(seed);
    testing::expect_default_rules_at_or_below_pytorchs(bench::three_stream_training_step(seed));
  }
}

TEST(MultiStreamSteadyState, ExpandableSegmentsNeverReserveMoreThanPyTorchsExpandableRules) {
  // The goal, 1.003, is missed here (1.08-1.12 with the default at_limit: one range per
  // stream, and free pages move only at the limit; docs/benchmarks.md); PyTorch's expandable
  // rules reserve more still.
  for (const std::uint64_t seed : {1U, 2U, 3U, 4U, 5U, 6U}) {
    SCOPED_TRACE(seed);
    testing::expect_expandable_at_or_below_pytorchs_expandable(
        bench::three_stream_training_step(seed));
  }
}

TEST(MultiStreamSteadyState, AboveThePeakAStreamTakesOtherStreamsFreePages) {
  // Under above_peak a growth past the high-water mark takes other streams' free pages for
  // what its own stream's lack. Taking only its own stream's, the steps reserved 1.05-1.08 of
  // their live peak; taking any stream's at every growth (always), 1.0085-1.0146.
  for (const std::uint64_t seed : {1U, 2U, 3U, 4U, 5U, 6U}) {
    SCOPED_TRACE(seed);
    const ReplayPlan plan = bench::three_stream_training_step(seed);
    const int iterations = testing::scaled_iterations(10);
    const bench::SteadyState ours = bench::memscope_steady_state(
        plan, "expandable_segments:true,expandable_segments_recycling:above_peak", iterations);
    ASSERT_EQ(ours.ratios.size(), static_cast<std::size_t>(iterations));
    for (std::size_t i = 0; i < ours.ratios.size(); ++i) {
      EXPECT_LE(ours.ratios[i], 1.02) << "iteration " << i + 1;
    }
    EXPECT_LE(ours.ratios.back(), ours.ratios.front() + 0.0005) << "creep";
    RecordProperty("worst_ratio_seed_" + std::to_string(seed),
                   std::to_string(*std::max_element(ours.ratios.begin(), ours.ratios.end())));
  }
}

}  // namespace
}  // namespace memscope

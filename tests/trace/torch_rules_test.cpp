// The reference model of PyTorch's placement (bench/torch_rules.hpp) on a plan built so that the
// tie rule decides the peak, and memscope's allocator following its own documented rule on it.
#include <gtest/gtest.h>

#include <memory>

#include "memscope/simulated_backend.hpp"
#include "memscope/trace.hpp"
#include "torch_rules.hpp"

namespace memscope {
namespace {

ReplayPlan plan_of(std::initializer_list<ReplayOp> ops) {
  ReplayPlan plan;
  plan.ops = ops;
  return plan;
}

ReplayOp alloc(std::uint64_t id, std::size_t size) {
  return {false, id, size, kDefaultStream};
}
ReplayOp release(std::uint64_t id) {
  return {true, id, 0, kDefaultStream};
}

// Two 20 MiB segments each end up with a free 8 MiB block at their start. The next 8 MiB request
// takes the older segment's (lowest address) or the newer one's (most recent); only the second
// choice lets the older segment empty out and serve a 20 MiB request without a third segment.
ReplayPlan tie_decides_the_peak() {
  return plan_of({alloc(1, 8 * MiB), alloc(2, 8 * MiB), alloc(3, 8 * MiB), alloc(4, 8 * MiB),
                  release(1), release(3), alloc(5, 8 * MiB), release(2), alloc(6, 20 * MiB)});
}

TEST(TorchRules, TheTieRuleCanDecideThePeak) {
  const ReplayPlan plan = tie_decides_the_peak();
  const auto lowest = bench::replay_torch_rules(plan, bench::TieBreak::lowest_address);
  const auto recent = bench::replay_torch_rules(plan, bench::TieBreak::most_recent);
  EXPECT_EQ(lowest.peak_reserved, 60 * MiB);
  EXPECT_EQ(lowest.segments, 3U);
  EXPECT_EQ(recent.peak_reserved, 40 * MiB);
  EXPECT_EQ(recent.segments, 2U);
  EXPECT_EQ(lowest.ties, 1U);                  // the 8 MiB request, with two 8 MiB blocks cached
  EXPECT_EQ(lowest.cache_hits, 3U);            // and the 20 MiB request misses
  EXPECT_EQ(lowest.peak_requested, 36 * MiB);  // 8 + 8 + 20 at the end
}

TEST(TorchRules, MemscopeBreaksTiesByRecency) {
  // docs/size-rules.md: among equal sizes the most recently cached block is taken.
  ReplayOptions options;
  options.capacity = GiB;
  options.record_series = true;
  const ReplayResult ours = replay(tie_decides_the_peak(), options);
  const auto model =
      bench::replay_torch_rules(tie_decides_the_peak(), bench::TieBreak::most_recent);
  EXPECT_EQ(ours.peak_reserved, static_cast<std::int64_t>(model.peak_reserved));
  ASSERT_EQ(ours.series.size(), model.reserved_series.size());
  for (std::size_t i = 0; i < ours.series.size(); ++i) {
    EXPECT_EQ(ours.series[i].reserved_bytes, static_cast<std::int64_t>(model.reserved_series[i]))
        << "after op " << i;
  }
}

}  // namespace
}  // namespace memscope

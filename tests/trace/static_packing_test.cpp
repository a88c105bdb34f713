// The no-move packing (bench/static_packing.hpp) beside the policy table: every packing it makes
// is a placement (no two blocks that live at the same time share a byte), never below what is
// live, never below the page bound, and on a plan where placing in order fragments it finds the
// placement that does not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "memscope/replay.hpp"
#include "memscope/units.hpp"
#include "multi_stream_plan.hpp"
#include "page_bound.hpp"
#include "static_packing.hpp"
#include "steady_state.hpp"

namespace memscope {
namespace {

using bench::PackedBlock;
using bench::PackGap;
using bench::PackOrder;

// 4 MiB, then 2 MiB, the 4 MiB freed, then 6 MiB: in order, the 6 MiB block finds no gap and
// goes above the 2 MiB one (12 MiB); knowing the step, it goes where the 4 MiB block was, the
// 4 MiB block below it in time as well, and the 2 MiB block above both (8 MiB, the live peak).
TEST(StaticPacking, KnowingTheStepPlacesWhereInOrderPlacementFragments) {
  bench::multi_stream_detail::PlanBuilder b;
  const std::uint64_t first = b.alloc(4 * MiB, 1);
  (void)b.alloc(2 * MiB, 1);
  b.free(first, 1);
  (void)b.alloc(6 * MiB, 1);
  const ReplayPlan plan = b.done();
  ASSERT_EQ(plan.peak_live, 8 * MiB);
  EXPECT_DOUBLE_EQ(bench::static_packing(plan), 1.0);
  const bench::SteadyState never = bench::memscope_steady_state(
      plan, "expandable_segments:true,expandable_segments_recycling:never", 1);
  EXPECT_DOUBLE_EQ(never.ratios.front(), 1.5);
}

// The most bytes live at once among `blocks`.
std::size_t load(const std::vector<PackedBlock>& blocks, std::size_t ops) {
  std::vector<std::int64_t> change(ops + 1, 0);
  for (const PackedBlock& b : blocks) {
    change[b.start] += static_cast<std::int64_t>(b.size);
    change[b.end] -= static_cast<std::int64_t>(b.size);
  }
  std::int64_t live = 0;
  std::int64_t peak = 0;
  for (const std::int64_t c : change) {
    live += c;
    peak = std::max(peak, live);
  }
  return static_cast<std::size_t>(peak);
}

TEST(StaticPacking, EveryPackingIsAPlacementOnRandomPlans) {
  std::mt19937_64 rng(25);
  for (int round = 0; round < 40; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    bench::multi_stream_detail::PlanBuilder builder;
    std::vector<std::pair<std::uint64_t, StreamId>> live;  // address, stream
    for (int op = 0; op < 300; ++op) {
      if (!live.empty() && rng() % 5 < 2) {
        const std::size_t at = rng() % live.size();
        builder.free(live[at].first, live[at].second);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(at));
      } else {
        // Two streams, small and large blocks, sizes not multiples of 512.
        const std::size_t size = rng() % 3 == 0 ? 1 + rng() % (64 * KiB) : 1 + rng() % (24 * MiB);
        const StreamId stream = 1 + static_cast<StreamId>(rng() % 2);
        live.emplace_back(builder.alloc(size, stream), stream);
      }
    }
    const ReplayPlan plan = builder.done();
    for (auto [pool, blocks] : bench::plan_blocks(plan)) {
      const std::size_t need = load(blocks, plan.ops.size());
      for (const PackOrder order : {PackOrder::size, PackOrder::lifetime, PackOrder::area}) {
        for (const PackGap gap : {PackGap::smallest, PackGap::lowest}) {
          const std::size_t extent = bench::pack_blocks(blocks, order, gap);
          EXPECT_GE(extent, need);
          for (std::size_t i = 0; i < blocks.size(); ++i) {
            const PackedBlock& a = blocks[i];
            EXPECT_LE(a.offset + a.size, extent);
            for (std::size_t j = i + 1; j < blocks.size(); ++j) {
              const PackedBlock& o = blocks[j];
              const bool together = a.start < o.end && o.start < a.end;
              const bool share = a.offset < o.offset + o.size && o.offset < a.offset + a.size;
              ASSERT_FALSE(together && share) << "blocks " << i << " and " << j;
            }
          }
        }
      }
    }
    EXPECT_GE(bench::static_packing(plan), bench::page_bound(plan));
  }
}

TEST(StaticPacking, NeverBelowThePageBoundOnSyntheticSteps) {
  for (const std::uint64_t seed : {1U, 2U, 3U}) {
    const ReplayPlan plan = bench::three_stream_training_step(seed);
    EXPECT_GE(bench::static_packing(plan), bench::page_bound(plan)) << "seed " << seed;
  }
}

}  // namespace
}  // namespace memscope

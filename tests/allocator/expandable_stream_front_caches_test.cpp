// Expandable segments, several streams: a free that merges (the slow free, cache_block) first
// moves its own stream's front-cached blocks into the bins, as if each had been merged when
// freed, and leaves every other stream's front cache as it is. It used to flush every stream's,
// a walk over all streams at each slow free (quadratic in streams; bench/many_streams.cpp
// --slow-frees), although no other stream's bins can see the block. Under above_peak it still
// does: growth above the peak finds other streams' free pages in their bins only.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "allocator/allocator_core.hpp"
#include "expandable_checks.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

constexpr StreamId kA = 1;
constexpr StreamId kB = 2;

class ExpandableStreamFrontCaches : public ::testing::TestWithParam<const char*> {};

// In its stream's front cache: freed, still in the pointer map, unmerged.
// The block at `ptr` in the pointer map (allocated or front-cached), or null.
const detail::Block* block_at(const AllocatorCore& core, const void* ptr) {
  return core.block_store().live().find(reinterpret_cast<std::uintptr_t>(ptr));
}

bool front_cached(AllocatorCore& core, const void* ptr) {
  const detail::Block* block = block_at(core, ptr);
  return block != nullptr && block->recent;
}

TEST_P(ExpandableStreamFrontCaches, ASlowFreeFlushesOnlyItsOwnStreamsFrontCache) {
  auto device = std::make_shared<SimulatedBackend>(64 * GiB);
  const AllocatorConfig config = AllocatorConfig::parse(
      std::string("expandable_segments:true,expandable_segments_recycling:") + GetParam());
  AllocatorCore core(*device, config);
  void* low = core.allocate(8 * MiB, kA);
  void* mid = core.allocate(8 * MiB, kA);
  void* high = core.allocate(8 * MiB, kA);  // keeps mid from being the range's tail
  // B's block last: under `always` a growth (of any stream) flushes every stream's front cache.
  void* theirs = core.allocate(4 * MiB, kB);
  ASSERT_TRUE(core.deallocate(theirs));
  ASSERT_TRUE(front_cached(core, theirs)) << "B's free did not take the front cache";

  ASSERT_TRUE(core.deallocate(low));
  ASSERT_TRUE(front_cached(core, low));
  ASSERT_TRUE(core.deallocate(mid));  // its neighbour below waits unmerged: the slow free
  EXPECT_FALSE(front_cached(core, low)) << "A's own front cache was not merged first";
  EXPECT_EQ(block_at(core, low), nullptr);
  if (std::string(GetParam()) == "above_peak") {
    // Its growths above the peak take other streams' free pages from their bins only.
    EXPECT_FALSE(front_cached(core, theirs)) << "above_peak: B's block is no donor unmerged";
  } else {
    EXPECT_TRUE(front_cached(core, theirs)) << "A's slow free flushed stream B's front cache";
  }
  core.validate();

  // B's block is still its hit, and A's merged space serves A as merging at each free would.
  EXPECT_EQ(core.allocate(4 * MiB, kB), theirs);
  EXPECT_EQ(core.allocate(16 * MiB, kA), low);
  core.validate();
  ASSERT_TRUE(core.deallocate(theirs));
  ASSERT_TRUE(core.deallocate(low));
  ASSERT_TRUE(core.deallocate(high));
  core.flush_recent();
  core.validate();
  EXPECT_GT(core.empty_cache(), 0U);
  core.validate();
}

INSTANTIATE_TEST_SUITE_P(Recycling, ExpandableStreamFrontCaches,
                         ::memscope::testing::kRecyclingPolicies, ::memscope::testing::policy_name);

}  // namespace
}  // namespace memscope

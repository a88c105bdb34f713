// ReplayOptions::peak_layout: the segments at the peak, taken during the replay itself, are what
// replaying the plan again up to the peak's op shows (how the report drew them before), and
// asking for them changes nothing else of the replay. Random steps from fixed seeds, fixed and
// expandable segments, on a roomy device and on one so tight that the allocator works at
// capacity.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "memscope/caching_allocator.hpp"
#include "memscope/replay.hpp"
#include "memscope/simulated_backend.hpp"
#include "random_step_plan.hpp"

namespace memscope {
namespace {

// The old way: a fresh allocator on a fresh device, the plan up to and including the peak's op.
std::vector<SegmentInfo> replayed_again_to(const ReplayPlan& plan, const ReplayOptions& options,
                                           std::size_t peak_op) {
  ReplayPlan upto = plan;
  upto.ops.resize(peak_op + 1);
  CachingAllocator allocator(std::make_shared<SimulatedBackend>(options.capacity), options.config);
  (void)replay(upto, allocator, false);
  return allocator.snapshot().segments;
}

void expect_same_segments(const std::vector<SegmentInfo>& a, const std::vector<SegmentInfo>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].address, b[i].address);
    EXPECT_EQ(a[i].total_size, b[i].total_size);
    EXPECT_EQ(a[i].stream, b[i].stream);
    ASSERT_EQ(a[i].blocks.size(), b[i].blocks.size()) << "segment " << i;
    for (std::size_t k = 0; k < a[i].blocks.size(); ++k) {
      EXPECT_EQ(a[i].blocks[k].address, b[i].blocks[k].address);
      EXPECT_EQ(a[i].blocks[k].size, b[i].blocks[k].size);
      EXPECT_EQ(a[i].blocks[k].requested_size, b[i].blocks[k].requested_size);
      EXPECT_EQ(a[i].blocks[k].state, b[i].blocks[k].state);
    }
  }
}

void check(const ReplayPlan& plan, ReplayOptions options, const std::string& what) {
  SCOPED_TRACE(what);
  options.record_series = true;
  options.peak_layout = false;
  const ReplayResult plain = replay(plan, options);
  options.peak_layout = true;
  const ReplayResult kept = replay(plan, options);

  EXPECT_FALSE(plain.peak_layout.has_value());
  EXPECT_EQ(kept.peak_reserved, plain.peak_reserved);
  EXPECT_EQ(kept.peak_allocated, plain.peak_allocated);
  EXPECT_EQ(kept.peak_requested, plain.peak_requested);
  EXPECT_EQ(kept.peak.op, plain.peak.op);
  EXPECT_EQ(kept.peak_live.op, plain.peak_live.op);
  EXPECT_EQ(kept.num_device_alloc, plain.num_device_alloc);
  EXPECT_EQ(kept.num_device_free, plain.num_device_free);
  EXPECT_EQ(kept.num_alloc_retries, plain.num_alloc_retries);
  EXPECT_EQ(kept.num_ooms, plain.num_ooms);
  ASSERT_EQ(kept.series.size(), plain.series.size());
  for (std::size_t i = 0; i < kept.series.size(); ++i) {
    ASSERT_EQ(kept.series[i].reserved_bytes, plain.series[i].reserved_bytes) << "op " << i;
    ASSERT_EQ(kept.series[i].allocated_bytes, plain.series[i].allocated_bytes) << "op " << i;
  }
  if (!kept.peak.happened()) {
    EXPECT_FALSE(kept.peak_layout.has_value());
    return;
  }
  ASSERT_TRUE(kept.peak_layout.has_value());
  const PeakLayout& layout = *kept.peak_layout;
  std::int64_t reserved = 0;
  for (const SegmentInfo& s : layout.segments) reserved += static_cast<std::int64_t>(s.total_size);
  EXPECT_EQ(reserved, kept.peak_reserved);
  expect_same_segments(layout.segments, replayed_again_to(plan, options, kept.peak.op));
  // Every allocated block is named by a live allocation of its requested size, and only those.
  std::size_t allocated = 0;
  for (const SegmentInfo& s : layout.segments) {
    for (const BlockInfo& b : s.blocks) {
      if (b.state != BlockState::active_allocated) continue;
      ++allocated;
      const std::size_t op = layout.op_at(b.address);
      ASSERT_LT(op, plan.ops.size()) << "block at " << b.address;
      EXPECT_FALSE(plan.ops[op].is_free);
      EXPECT_LE(op, kept.peak.op);
      EXPECT_EQ(plan.ops[op].size, b.requested_size);
    }
  }
  EXPECT_EQ(allocated, layout.allocated_by.size());
  EXPECT_EQ(layout.op_at(1), ReplayMoment::kNever);
}

TEST(PeakLayout, KeptDuringTheReplayIsTheLayoutAtThePeakAndChangesNothing) {
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    const ReplayPlan plan =
        seed % 2 == 0 ? testing::random_step(seed) : testing::random_wide_step(seed);
    for (const char* config : {"", "expandable_segments:True"}) {
      ReplayOptions options;
      options.config = AllocatorConfig::parse(config);
      check(plan, options, "seed " + std::to_string(seed) + " '" + config + "' 80 GiB");
      // Tight: a little over the live peak, so segments are released and retried at capacity.
      options.capacity = (plan.peak_live + plan.peak_live / 16) / (2 * MiB) * (2 * MiB) + 2 * MiB;
      check(plan, options, "seed " + std::to_string(seed) + " '" + config + "' tight");
    }
  }
}

}  // namespace
}  // namespace memscope

// Recording with expandable segments: pages mapped and unmapped show as segment_map and
// segment_unmap events (addr: the first byte, size: the bytes), never as segment_alloc or
// segment_free, and replaying those events page by page rebuilds exactly the mapped ranges the
// snapshot shows.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "expandable_checks.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/trace_events.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

constexpr std::size_t kPage = 2 * MiB;  // the default page of both pools

const std::vector<TraceEvent>& events_of(const TorchSnapshot& s) {
  static const std::vector<TraceEvent> none;
  return s.device_traces.empty() ? none : s.device_traces[0];
}

TEST(ExpandableRecording, AllocationAndEmptyCacheRecordMapAndUnmap) {
  auto device = std::make_shared<SimulatedBackend>(8 * GiB);
  CachingAllocator allocator(device, AllocatorConfig::parse("expandable_segments:true"));
  allocator.start_recording();
  void* a = allocator.allocate(3 * MiB, /*stream=*/1);
  allocator.deallocate(a);
  EXPECT_EQ(allocator.empty_cache(), 4 * MiB);
  const TorchSnapshot recorded = allocator.recorded_snapshot();
  const auto& events = events_of(recorded);
  ASSERT_FALSE(events.empty());
  std::vector<TraceEvent> maps;
  std::vector<TraceEvent> unmaps;
  for (const TraceEvent& e : events) {
    EXPECT_NE(e.action, TraceAction::segment_alloc);
    EXPECT_NE(e.action, TraceAction::segment_free);
    if (e.action == TraceAction::segment_map) maps.push_back(e);
    if (e.action == TraceAction::segment_unmap) unmaps.push_back(e);
  }
  ASSERT_EQ(maps.size(), 1U);
  ASSERT_EQ(unmaps.size(), 1U);
  EXPECT_EQ(maps[0].addr, reinterpret_cast<std::uintptr_t>(a));
  EXPECT_EQ(maps[0].size, 4 * MiB);
  EXPECT_EQ(maps[0].stream, StreamId{1});
  EXPECT_EQ(unmaps[0].addr, reinterpret_cast<std::uintptr_t>(a));
  EXPECT_EQ(unmaps[0].size, 4 * MiB);
  EXPECT_EQ(unmaps[0].stream, StreamId{1});
  // The map comes before the block's alloc, the unmap after its free.
  EXPECT_EQ(events.front().action, TraceAction::segment_map);
}

// Applies one map or unmap event to the set of mapped pages; false when it maps a page already
// mapped or unmaps one that is not.
bool apply(const TraceEvent& e, std::set<std::uint64_t>& pages) {
  if (e.addr % kPage != 0 || e.size % kPage != 0 || e.size == 0) return false;
  for (std::uint64_t page = e.addr; page < e.addr + e.size; page += kPage) {
    const bool ok =
        e.action == TraceAction::segment_map ? pages.insert(page).second : pages.erase(page) == 1;
    if (!ok) return false;
  }
  return true;
}

class ExpandableRecordingPolicy : public ::testing::TestWithParam<const char*> {};

TEST_P(ExpandableRecordingPolicy, ReplayingMapAndUnmapEventsRebuildsTheMappedRanges) {
  // A 2 GiB device: the out-of-memory flush unmaps pages too.
  auto device = std::make_shared<SimulatedBackend>(2 * GiB);
  CachingAllocator allocator(device,
                             AllocatorConfig::parse(std::string("expandable_segments:true,"
                                                                "expandable_segments_recycling:") +
                                                    GetParam()));
  allocator.start_recording({.max_entries = 1'000'000});
  std::mt19937_64 rng(6);
  const auto uniform = [&rng](std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
  };
  std::vector<void*> live;
  for (int step = 0; step < 5'000; ++step) {
    const std::size_t op = uniform(0, 99);
    if (op < 50 && live.size() < 40) {
      const std::size_t size = uniform(0, 2) == 0 ? uniform(1, 1 * MiB) : uniform(1, 200 * MiB);
      try {
        live.push_back(allocator.allocate(size, uniform(0, 2)));
      } catch (const OutOfMemoryError&) {
      }
    } else if (op < 98 && !live.empty()) {
      const std::size_t i = uniform(0, live.size() - 1);
      allocator.deallocate(live[i]);
      live[i] = live.back();
      live.pop_back();
    } else {
      (void)allocator.empty_cache();
    }
  }
  const TorchSnapshot recorded = allocator.recorded_snapshot();
  ASSERT_EQ(recorded.dropped_events, 0U);
  std::set<std::uint64_t> pages;
  std::size_t maps = 0;
  std::size_t unmaps = 0;
  for (const TraceEvent& e : events_of(recorded)) {
    ASSERT_NE(e.action, TraceAction::segment_alloc);
    ASSERT_NE(e.action, TraceAction::segment_free);
    if (e.action == TraceAction::segment_map || e.action == TraceAction::segment_unmap) {
      ASSERT_TRUE(apply(e, pages)) << to_string(e.action) << " at " << e.addr << " of " << e.size
                                   << " bytes does not fit the pages mapped before it";
      maps += e.action == TraceAction::segment_map ? 1 : 0;
      unmaps += e.action == TraceAction::segment_unmap ? 1 : 0;
    }
  }
  EXPECT_GT(maps, 50U);
  // One event per backend call: num_device_alloc counts map calls, num_device_free unmap calls
  // (a move is one of each, and records one of each).
  const MemoryStats stats = allocator.stats();
  EXPECT_EQ(maps, static_cast<std::size_t>(stats.num_device_alloc));
  EXPECT_EQ(unmaps, static_cast<std::size_t>(stats.num_device_free));
  std::set<std::uint64_t> snapshot_pages;
  for (const SegmentInfo& s : allocator.snapshot().segments) {
    for (std::uint64_t page = s.address; page < s.address + s.total_size; page += kPage) {
      snapshot_pages.insert(page);
    }
  }
  EXPECT_EQ(pages, snapshot_pages);
  EXPECT_EQ(pages.size() * kPage,
            static_cast<std::size_t>(allocator.stats().reserved_bytes[0].current));
  for (void* p : live) allocator.deallocate(p);
}

INSTANTIATE_TEST_SUITE_P(Recycling, ExpandableRecordingPolicy,
                         ::memscope::testing::kRecyclingPolicies, ::memscope::testing::policy_name);

}  // namespace
}  // namespace memscope

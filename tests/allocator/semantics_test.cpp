// The field's semantics, as torch.cuda's own tests check them, on the simulated device.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "allocator_invariants.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

constexpr auto kAll = static_cast<std::size_t>(StatPool::all);
constexpr auto kSmall = static_cast<std::size_t>(StatPool::small);
constexpr auto kLarge = static_cast<std::size_t>(StatPool::large);

class Semantics : public ::testing::Test {
 protected:
  std::shared_ptr<SimulatedBackend> device = std::make_shared<SimulatedBackend>(64 * GiB);
  CachingAllocator allocator{device, AllocatorConfig{}};
};

TEST_F(Semantics, RoundupPowerOfTwoDivisionsShapeTheBlocks) {
  // Regression: the allocator once ignored roundup_power2_divisions (the flag that enables it
  // was never initialised), so blocks kept their plain 512-byte rounding.
  CachingAllocator rounding(device, AllocatorConfig::parse("roundup_power2_divisions:4"));
  void* a = rounding.allocate(1200 * MiB);
  void* b = rounding.allocate(4700);  // plain rounding would give 4608
  EXPECT_EQ(rounding.lookup(a).size, 1280 * MiB);
  EXPECT_EQ(rounding.lookup(b).size, 5120U);
  EXPECT_EQ(rounding.lookup(a).requested_size, 1200 * MiB);
  void* c = allocator.allocate(1200 * MiB);  // the default config rounds to 512 bytes
  EXPECT_EQ(allocator.lookup(c).size, 1200 * MiB);
  rounding.deallocate(a);
  rounding.deallocate(b);
  allocator.deallocate(c);
}

TEST_F(Semantics, ZeroBytesIsNullAndChangesNothing) {
  EXPECT_EQ(allocator.allocate(0), nullptr);
  EXPECT_EQ(allocator.stats(), CachingAllocator(device, AllocatorConfig{}).stats());
  allocator.deallocate(nullptr);
  EXPECT_EQ(allocator.stats().num_invalid_frees, 0);
}

TEST_F(Semantics, RoundsTo512AndPicksPoolBySize) {
  void* a = allocator.allocate(1);
  void* b = allocator.allocate(1000);
  void* c = allocator.allocate(3 * MiB);
  const MemoryStats s = allocator.stats();
  EXPECT_EQ(s.allocated_bytes[kSmall].current, 512 + 1024);
  EXPECT_EQ(s.requested_bytes[kSmall].current, 1 + 1000);
  EXPECT_EQ(s.allocated_bytes[kLarge].current, static_cast<std::int64_t>(3 * MiB));
  EXPECT_EQ(s.reserved_bytes[kSmall].current, static_cast<std::int64_t>(2 * MiB));
  EXPECT_EQ(s.reserved_bytes[kLarge].current, static_cast<std::int64_t>(20 * MiB));
  EXPECT_EQ(s.segment[kAll].current, 2);
  EXPECT_TRUE(testing::allocator_consistent(allocator));
  allocator.deallocate(a);
  allocator.deallocate(b);
  allocator.deallocate(c);
  EXPECT_TRUE(testing::allocator_consistent(allocator));
}

TEST_F(Semantics, TenBlocksFreeEveryOther) {
  std::vector<void*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(allocator.allocate(10 * MiB));
  for (std::size_t i = 0; i < blocks.size(); i += 2) allocator.deallocate(blocks[i]);
  const MemoryStats s = allocator.stats();
  EXPECT_EQ(s.allocated_bytes[kAll].current, static_cast<std::int64_t>(50 * MiB));
  EXPECT_EQ(s.allocated_bytes[kAll].peak, static_cast<std::int64_t>(100 * MiB));
  EXPECT_EQ(s.allocation[kAll].current, 5);
  EXPECT_EQ(s.allocation[kAll].peak, 10);
  EXPECT_EQ(s.allocated_bytes[kAll].allocated, static_cast<std::int64_t>(100 * MiB));
  EXPECT_EQ(s.allocated_bytes[kAll].freed, static_cast<std::int64_t>(50 * MiB));
  EXPECT_TRUE(testing::allocator_consistent(allocator));
}

TEST_F(Semantics, EmptyCacheBumpsSyncOnceNeverRaisesReservedKeepsPeaks) {
  void* keep = allocator.allocate(5 * MiB);
  void* drop = allocator.allocate(30 * MiB);
  allocator.deallocate(drop);
  const MemoryStats before = allocator.stats();
  const std::size_t released = allocator.empty_cache();
  const MemoryStats after = allocator.stats();
  EXPECT_EQ(after.num_sync_all_streams, before.num_sync_all_streams + 1);
  EXPECT_LE(after.reserved_bytes[kAll].current, before.reserved_bytes[kAll].current);
  EXPECT_EQ(static_cast<std::size_t>(before.reserved_bytes[kAll].current -
                                     after.reserved_bytes[kAll].current),
            released);
  EXPECT_EQ(released, 30 * MiB);
  EXPECT_EQ(after.reserved_bytes[kAll].peak, before.reserved_bytes[kAll].peak);
  EXPECT_EQ(after.allocated_bytes[kAll].peak, before.allocated_bytes[kAll].peak);
  EXPECT_EQ(device->reserved_bytes(), static_cast<std::size_t>(after.reserved_bytes[kAll].current));
  // A second call has nothing left to release.
  EXPECT_EQ(allocator.empty_cache(), 0U);
  EXPECT_EQ(allocator.stats().num_sync_all_streams, before.num_sync_all_streams + 2);
  allocator.deallocate(keep);
}

TEST_F(Semantics, SegmentWithOneLiveSplitBlockIsNotReleased) {
  void* a = allocator.allocate(2 * MiB);  // a 20 MiB segment, split
  void* b = allocator.allocate(2 * MiB);  // same segment
  allocator.deallocate(b);
  EXPECT_EQ(allocator.empty_cache(), 0U);
  EXPECT_EQ(allocator.stats().reserved_bytes[kAll].current, static_cast<std::int64_t>(20 * MiB));
  EXPECT_EQ(allocator.stats().inactive_split[kAll].current, 1);
  allocator.deallocate(a);
  EXPECT_EQ(allocator.stats().inactive_split[kAll].current, 0);
  EXPECT_EQ(allocator.empty_cache(), 20 * MiB);
  EXPECT_EQ(device->reserved_bytes(), 0U);
}

TEST_F(Semantics, ResetPeakSetsPeakToCurrentAndTouchesNothingElse) {
  void* a = allocator.allocate(40 * MiB);
  void* b = allocator.allocate(1 * KiB);
  allocator.deallocate(a);
  MemoryStats expected = allocator.stats();
  allocator.reset_peak_stats();
  const MemoryStats s = allocator.stats();
  const auto flat = s.flatten();
  for (const auto& [key, value] : flat) {
    if (key.ends_with(".peak")) {
      const std::string current = key.substr(0, key.size() - 5) + ".current";
      EXPECT_EQ(value, flat.at(current)) << key;
    }
  }
  expected.reset_peak();
  EXPECT_EQ(s, expected);
  allocator.deallocate(b);
}

TEST_F(Semantics, ResetAccumulatedZeroesTotalsAndCountersOnly) {
  void* a = allocator.allocate(3 * MiB);
  allocator.deallocate(a);
  (void)allocator.empty_cache();
  const MemoryStats before = allocator.stats();
  allocator.reset_accumulated_stats();
  const MemoryStats s = allocator.stats();
  EXPECT_EQ(s.allocated_bytes[kAll].allocated, 0);
  EXPECT_EQ(s.allocated_bytes[kAll].freed, 0);
  EXPECT_EQ(s.num_device_alloc, 0);
  EXPECT_EQ(s.num_device_free, 0);
  EXPECT_EQ(s.num_sync_all_streams, 0);
  EXPECT_EQ(s.allocated_bytes[kAll].peak, before.allocated_bytes[kAll].peak);
  EXPECT_EQ(s.reserved_bytes[kAll].current, before.reserved_bytes[kAll].current);
}

TEST_F(Semantics, FreedBlockIsReusedForSameSizeOnSameStream) {
  void* a = allocator.allocate(4 * KiB);
  allocator.deallocate(a);
  void* b = allocator.allocate(4 * KiB);
  EXPECT_EQ(a, b);
  EXPECT_EQ(allocator.stats().num_device_alloc, 1);
  allocator.deallocate(b);
}

TEST_F(Semantics, BlockFreedOnOneStreamIsNotHandedToAnother) {
  void* a = allocator.allocate(4 * KiB, /*stream=*/1);
  allocator.deallocate(a);
  void* b = allocator.allocate(4 * KiB, /*stream=*/2);
  EXPECT_NE(a, b);
  EXPECT_EQ(allocator.stats().segment[kAll].current, 2);
  EXPECT_EQ(allocator.lookup(b).stream, 2U);
  allocator.deallocate(b);
}

TEST_F(Semantics, RecordedStreamDelaysReuseUntilItsWorkIsDone) {
  constexpr StreamId kOther = 7;
  void* a = allocator.allocate(1 * MiB);
  device->hold(kOther);  // work queued on kOther is now pending
  allocator.record_stream(a, kOther);
  allocator.deallocate(a);
  EXPECT_EQ(allocator.stats().active[kAll].current, 1);  // freed but pending
  EXPECT_EQ(allocator.stats().allocation[kAll].current, 0);
  void* b = allocator.allocate(1 * MiB);
  EXPECT_NE(a, b) << "reused while the recorded stream was still working";
  EXPECT_TRUE(testing::allocator_consistent(allocator));
  device->complete(kOther);
  allocator.deallocate(b);
  void* c = allocator.allocate(1 * MiB);  // events are processed at allocation time
  EXPECT_EQ(allocator.stats().active[kAll].current, 1);
  EXPECT_TRUE(c == a || c == b);
  EXPECT_TRUE(testing::allocator_consistent(allocator));
  allocator.deallocate(c);
}

TEST_F(Semantics, EmptyCacheWaitsForPendingBlocks) {
  constexpr StreamId kOther = 3;
  void* a = allocator.allocate(30 * MiB);
  device->hold(kOther);
  allocator.record_stream(a, kOther);
  allocator.deallocate(a);
  EXPECT_EQ(device->pending_events(), 1U);
  EXPECT_EQ(allocator.empty_cache(), 30 * MiB);
  EXPECT_EQ(device->pending_events(), 0U);
  EXPECT_EQ(allocator.stats().active[kAll].current, 0);
  EXPECT_EQ(device->reserved_bytes(), 0U);
}

TEST_F(Semantics, RecordStreamOnUnknownPointerThrows) {
  int local = 0;
  EXPECT_THROW(allocator.record_stream(&local, 1), InvalidPointerError);
}

TEST_F(Semantics, InvalidFreeIsCountedNotFatal) {
  void* a = allocator.allocate(512);
  allocator.deallocate(a);
  EXPECT_FALSE(allocator.try_deallocate(a));
  allocator.deallocate(a);
  EXPECT_EQ(allocator.stats().num_invalid_frees, 2);
  EXPECT_EQ(allocator.stats().allocation[kAll].current, 0);
}

TEST_F(Semantics, OversizeBlocksAreNotSplitAndCounted) {
  AllocatorConfig config;
  config.max_split_size = 64 * MiB;
  CachingAllocator limited(device, config);
  void* big = limited.allocate(100 * MiB);
  limited.deallocate(big);
  // A small-large request must not take (and pin) the cached oversize block.
  void* medium = limited.allocate(30 * MiB);
  EXPECT_NE(medium, big);
  const MemoryStats s = limited.stats();
  EXPECT_EQ(s.oversize_segments.current, 1);
  EXPECT_EQ(s.oversize_allocations.current, 0);
  EXPECT_EQ(s.max_split_size, static_cast<std::int64_t>(64 * MiB));
  // An oversize request may reuse a cached oversize block if the waste stays under 20 MiB.
  void* again = limited.allocate(90 * MiB);
  EXPECT_EQ(again, big);
  EXPECT_EQ(limited.stats().oversize_allocations.current, 1);
  EXPECT_EQ(limited.lookup(again).size, 100 * MiB);  // whole: oversize blocks are not split
  EXPECT_TRUE(testing::allocator_consistent(limited));
  limited.deallocate(again);
  limited.deallocate(medium);
}

// Limit 800 MiB and threshold 0.5: collection starts once reserved passes 400 MiB. An old
// segment and a recent one are cached; a miss collects the old one only. `reset_in_between`:
// reset_accumulated_stats() first, which zeroes the allocation count the gc clock derives from
// (so the hot path ticks nothing more): the clock must run on, else a block cached before the
// reset looks older or younger than it is.
void expect_gc_releases_the_older_segment(const std::shared_ptr<SimulatedBackend>& device,
                                          bool reset_in_between) {
  CachingAllocator gc(
      device, AllocatorConfig::parse("garbage_collection_threshold:0.5,memory_limit:800MiB"));
  void* old_block = gc.allocate(200 * MiB);
  gc.deallocate(old_block);  // cached early
  std::vector<void*> small;
  for (int i = 0; i < 10; ++i) small.push_back(gc.allocate(4 * KiB));  // time passes
  void* recent = gc.allocate(250 * MiB);
  gc.deallocate(recent);  // cached late
  EXPECT_EQ(gc.stats().num_device_free, 0);
  if (reset_in_between) {
    gc.reset_accumulated_stats();
    for (int i = 0; i < 3; ++i) small.push_back(gc.allocate(4 * KiB));  // a little time passes
  }
  // A miss with 452 MiB reserved: the old segment goes, the recent one stays.
  void* big = gc.allocate(300 * MiB);
  const MemoryStats s = gc.stats();
  EXPECT_EQ(s.num_device_free, 1);
  EXPECT_EQ(s.reserved_bytes[kLarge].current, static_cast<std::int64_t>(550 * MiB));
  void* again = gc.allocate(250 * MiB);  // the recent segment is still cached: a hit
  EXPECT_EQ(again, recent);
  EXPECT_EQ(gc.stats().num_device_alloc, s.num_device_alloc);
  EXPECT_TRUE(testing::allocator_consistent(gc));
  for (void* p : small) gc.deallocate(p);
  gc.deallocate(big);
  gc.deallocate(again);
}

TEST_F(Semantics, GarbageCollectionReleasesTheOldestCachedSegmentsFirst) {
  expect_gc_releases_the_older_segment(device, /*reset_in_between=*/false);
}

TEST_F(Semantics, GarbageCollectionAgesSurviveResetAccumulatedStats) {
  expect_gc_releases_the_older_segment(device, /*reset_in_between=*/true);
}

TEST_F(Semantics, MemoryStatsUsesTorchKeyNames) {
  const auto flat = allocator.memory_stats();
  for (const char* key :
       {"allocated_bytes.all.current", "allocated_bytes.small_pool.peak",
        "reserved_bytes.large_pool.freed", "active.all.allocated",
        "inactive_split_bytes.all.current", "requested_bytes.all.peak", "segment.all.current",
        "num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc",
        "num_device_free", "max_split_size", "oversize_allocations.current",
        "oversize_segments.peak"}) {
    EXPECT_TRUE(flat.contains(key)) << key;
  }
  EXPECT_EQ(flat.at("max_split_size"), -1);
}

TEST_F(Semantics, SummaryAndSnapshotJsonDescribeTheState) {
  void* a = allocator.allocate(3 * MiB);
  const std::string summary = allocator.memory_summary();
  EXPECT_NE(summary.find("Allocated memory"), std::string::npos);
  EXPECT_NE(summary.find("3.00 MiB"), std::string::npos);
  const std::string json = allocator.snapshot().to_json(-1);
  EXPECT_NE(json.find("\"state\":\"active_allocated\""), std::string::npos);
  EXPECT_NE(json.find("\"total_size\":20971520"), std::string::npos);
  allocator.deallocate(a);
}

}  // namespace
}  // namespace memscope

// Expandable segments and stream ordering, on the simulated device (hold/complete model a
// stream still working): a block freed while a recorded stream works on it is neither reused,
// unmapped nor moved (its pages recycled) until that work completes; empty_cache() waits for it.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "expandable_checks.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

constexpr auto kAll = static_cast<std::size_t>(StatPool::all);
constexpr StreamId kWorker = 7;

std::uintptr_t at(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

bool overlaps(const void* a, std::size_t a_size, const void* b, std::size_t b_size) {
  return at(a) < at(b) + b_size && at(b) < at(a) + a_size;
}

// The block at `p` is pending and still mapped where it was.
::testing::AssertionResult still_pending(const CachingAllocator& allocator, const void* p,
                                         std::size_t size) {
  const Snapshot snap = allocator.snapshot();
  const BlockInfo* b = testing::block_at(snap, at(p));
  if (b == nullptr) return ::testing::AssertionFailure() << "no block starts at the freed block";
  if (b->state != BlockState::active_pending_free) {
    return ::testing::AssertionFailure() << "the freed block is " << to_string(b->state);
  }
  if (b->size != size) return ::testing::AssertionFailure() << "the freed block's size changed";
  if (!testing::mapped(snap, at(p), size)) {
    return ::testing::AssertionFailure() << "pages of the pending block were unmapped or moved";
  }
  return ::testing::AssertionSuccess();
}

class ExpandableStreams : public ::testing::TestWithParam<const char*> {
 protected:
  [[nodiscard]] AllocatorConfig config(const std::string& extra = "") const {
    return AllocatorConfig::parse(
        extra + "expandable_segments:true,expandable_segments_recycling:" + GetParam());
  }
};

TEST_P(ExpandableStreams, APendingBlockIsNotReusedOnItsOwnStream) {
  auto device = std::make_shared<SimulatedBackend>(4 * GiB);
  CachingAllocator allocator(device, config());
  void* p = allocator.allocate(64 * MiB);
  device->hold(kWorker);
  allocator.record_stream(p, kWorker);
  allocator.deallocate(p);
  void* q = allocator.allocate(64 * MiB);
  EXPECT_FALSE(overlaps(p, 64 * MiB, q, 64 * MiB));
  EXPECT_TRUE(still_pending(allocator, p, 64 * MiB));
  EXPECT_TRUE(testing::expandable_consistent(allocator));
  device->complete(kWorker);
  allocator.deallocate(q);
  void* r = allocator.allocate(64 * MiB);
  EXPECT_EQ(r, p) << "once the work completed, the lowest free block is reused";
  allocator.deallocate(r);
}

TEST_P(ExpandableStreams, RecyclingNeverTakesThePagesOfAPendingBlock) {
  // 64 MiB pending on stream 0; stream 1 then asks for 64 MiB. Every policy may recycle free
  // pages, but the only cached pages belong to the pending block: it must map new ones.
  auto device = std::make_shared<SimulatedBackend>(4 * GiB);
  CachingAllocator allocator(device, config());
  void* p = allocator.allocate(64 * MiB);
  device->hold(kWorker);
  allocator.record_stream(p, kWorker);
  allocator.deallocate(p);
  void* q = allocator.allocate(64 * MiB, /*stream=*/1);
  EXPECT_TRUE(still_pending(allocator, p, 64 * MiB));
  EXPECT_EQ(device->pending_events(), 1U) << "nothing waited for the worker stream";
  EXPECT_EQ(allocator.stats().num_sync_all_streams, 0);
  EXPECT_EQ(device->reserved_bytes(), 128 * MiB);
  EXPECT_TRUE(testing::expandable_consistent(allocator));

  // Once the work is done, its pages are free pages like any other.
  device->complete(kWorker);
  void* r = allocator.allocate(64 * MiB, /*stream=*/2);
  const MemoryStats s = allocator.stats();
  const std::string policy = GetParam();
  if (policy == "never" || policy == "at_limit") {
    // Far from the 4 GiB limit: new pages.
    EXPECT_EQ(s.reserved_bytes[kAll].current, static_cast<std::int64_t>(192 * MiB));
  } else {
    // Mapping 64 MiB more would pass the high-water mark of 128 MiB: p's free pages move
    // (above_peak takes other streams' free pages for what stream 2's own, none, lack).
    EXPECT_EQ(s.reserved_bytes[kAll].current, static_cast<std::int64_t>(128 * MiB))
        << "the completed block's free pages were not recycled";
  }
  EXPECT_EQ(device->reserved_bytes(), static_cast<std::size_t>(s.reserved_bytes[kAll].current));
  EXPECT_TRUE(testing::expandable_consistent(allocator));
  allocator.deallocate(q);
  allocator.deallocate(r);
}

TEST_P(ExpandableStreams, OutOfRoomTheAllocatorWaitsForThePendingBlockBeforeTakingItsPages) {
  // A 128 MiB device: 64 MiB pending, stream 1 wants 96 MiB. Only the pending block's pages
  // can make room, and only after waiting for the worker (the out-of-memory path's flush).
  auto device = std::make_shared<SimulatedBackend>(128 * MiB);
  CachingAllocator allocator(device, config());
  void* p = allocator.allocate(64 * MiB);
  device->hold(kWorker);
  allocator.record_stream(p, kWorker);
  allocator.deallocate(p);
  void* q = allocator.allocate(96 * MiB, /*stream=*/1);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(device->pending_events(), 0U) << "p's pages were taken without waiting for its work";
  EXPECT_GE(allocator.stats().num_sync_all_streams, 1);
  EXPECT_EQ(allocator.stats().num_ooms, 0);
  EXPECT_TRUE(testing::expandable_consistent(allocator));
  allocator.deallocate(q);
}

TEST_P(ExpandableStreams, EmptyCacheWaitsForPendingWorkThenUnmapsTheBlock) {
  auto device = std::make_shared<SimulatedBackend>(4 * GiB);
  CachingAllocator allocator(device, config());
  void* keep = allocator.allocate(8 * MiB);
  void* p = allocator.allocate(32 * MiB);
  device->hold(kWorker);
  allocator.record_stream(p, kWorker);
  allocator.deallocate(p);
  ASSERT_EQ(device->pending_events(), 1U);
  const std::size_t released = allocator.empty_cache();
  EXPECT_EQ(device->pending_events(), 0U);
  EXPECT_EQ(released, 32 * MiB);
  EXPECT_EQ(device->reserved_bytes(), 8 * MiB);
  EXPECT_EQ(allocator.stats().num_sync_all_streams, 1);
  EXPECT_TRUE(testing::expandable_consistent(allocator));
  allocator.deallocate(keep);
}

TEST_P(ExpandableStreams, BlocksAreNeverHandedAcrossStreams) {
  auto device = std::make_shared<SimulatedBackend>(4 * GiB);
  CachingAllocator allocator(device, config());
  void* a = allocator.allocate(10 * MiB, /*stream=*/1);
  allocator.deallocate(a);
  void* b = allocator.allocate(10 * MiB, /*stream=*/2);
  EXPECT_EQ(allocator.lookup(b).stream, StreamId{2});
  const Snapshot snap = allocator.snapshot();
  for (const SegmentInfo& s : snap.segments) {
    if (s.address <= at(b) && at(b) < s.address + s.total_size) {
      EXPECT_EQ(s.stream, StreamId{2});
    }
  }
  EXPECT_TRUE(testing::expandable_consistent(allocator));
  allocator.deallocate(b);
}

INSTANTIATE_TEST_SUITE_P(Recycling, ExpandableStreams, ::memscope::testing::kRecyclingPolicies,
                         ::memscope::testing::policy_name);

}  // namespace
}  // namespace memscope

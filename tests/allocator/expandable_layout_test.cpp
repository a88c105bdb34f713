// Where expandable segments put memory, on the simulated device: one growable range per stream
// and pool, blocks packed from its start, new pages at the lowest address that fits (so a hole
// left by a free is filled before the range grows), and free neighbours merged so that freeing
// everything leaves one free block per mapped range.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "expandable_checks.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

constexpr auto kAll = static_cast<std::size_t>(StatPool::all);
constexpr auto kSmall = static_cast<std::size_t>(StatPool::small);
constexpr auto kLarge = static_cast<std::size_t>(StatPool::large);

std::uintptr_t at(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

class ExpandableLayout : public ::testing::Test {
 protected:
  std::shared_ptr<SimulatedBackend> device = std::make_shared<SimulatedBackend>(64 * GiB);
  CachingAllocator allocator{device, AllocatorConfig::parse("expandable_segments:true")};
};

TEST_F(ExpandableLayout, BlocksOfOneStreamArePackedIntoOneMappedRange) {
  void* a = allocator.allocate(4 * MiB);
  void* b = allocator.allocate(8 * MiB);
  void* c = allocator.allocate(6 * MiB);
  EXPECT_EQ(at(b), at(a) + 4 * MiB);
  EXPECT_EQ(at(c), at(b) + 8 * MiB);
  const MemoryStats s = allocator.stats();
  // Mapped bytes only: no 20 MiB segment rounding, no rounding beyond the 2 MiB page.
  EXPECT_EQ(s.reserved_bytes[kLarge].current, static_cast<std::int64_t>(18 * MiB));
  EXPECT_EQ(s.segment[kAll].current, 1);
  EXPECT_EQ(device->reserved_bytes(), 18 * MiB);
  const Snapshot snap = allocator.snapshot();
  ASSERT_EQ(snap.segments.size(), 1U);
  EXPECT_EQ(snap.segments[0].address, at(a));
  EXPECT_TRUE(snap.segments[0].is_expandable);
  EXPECT_TRUE(testing::expandable_consistent(allocator));
  for (void* p : {a, b, c}) allocator.deallocate(p);
}

TEST_F(ExpandableLayout, SmallAndLargePoolsAndStreamsHaveRangesOfTheirOwn) {
  void* small0 = allocator.allocate(1000);
  void* large0 = allocator.allocate(3 * MiB);
  void* large1 = allocator.allocate(3 * MiB, /*stream=*/1);
  const Snapshot snap = allocator.snapshot();
  ASSERT_EQ(snap.segments.size(), 3U);
  const MemoryStats s = allocator.stats();
  EXPECT_EQ(s.reserved_bytes[kSmall].current, static_cast<std::int64_t>(2 * MiB));  // one page
  EXPECT_EQ(s.reserved_bytes[kLarge].current, static_cast<std::int64_t>(8 * MiB));  // 2 x 2 pages
  for (const SegmentInfo& seg : snap.segments) {
    const bool holds_small = seg.address == at(small0);
    EXPECT_EQ(seg.small_pool, holds_small);
    EXPECT_EQ(seg.stream, seg.address == at(large1) ? StreamId{1} : kDefaultStream);
  }
  EXPECT_TRUE(testing::expandable_consistent(allocator));
  for (void* p : {small0, large0, large1}) allocator.deallocate(p);
}

TEST_F(ExpandableLayout, ASmallerBlockLandsInTheHoleOfAFreedMiddleBlock) {
  void* a = allocator.allocate(4 * MiB);
  void* b = allocator.allocate(16 * MiB);
  void* c = allocator.allocate(4 * MiB);
  allocator.deallocate(b);
  void* d = allocator.allocate(6 * MiB);
  EXPECT_EQ(d, b) << "the hole is the lowest address that fits";
  EXPECT_EQ(allocator.stats().reserved_bytes[kAll].current, static_cast<std::int64_t>(24 * MiB))
      << "nothing new mapped: the hole had room";
  EXPECT_TRUE(testing::expandable_consistent(allocator));
  for (void* p : {a, c, d}) allocator.deallocate(p);
}

TEST_F(ExpandableLayout, NewPagesAreMappedIntoTheLowestUnmappedGapThatFits) {
  void* a = allocator.allocate(4 * MiB);
  void* b = allocator.allocate(16 * MiB);
  void* c = allocator.allocate(4 * MiB);
  allocator.deallocate(b);
  ASSERT_EQ(allocator.empty_cache(), 16 * MiB) << "the hole's whole pages are unmapped";
  ASSERT_EQ(allocator.snapshot().segments.size(), 2U) << "two mapped ranges: a's and c's";
  void* d = allocator.allocate(10 * MiB);
  EXPECT_EQ(d, b) << "mapped into the gap, not after c";
  EXPECT_EQ(allocator.snapshot().segments.size(), 2U) << "a+d one range, c another";
  void* e = allocator.allocate(6 * MiB);
  EXPECT_EQ(at(e), at(d) + 10 * MiB) << "the rest of the gap";
  EXPECT_EQ(allocator.snapshot().segments.size(), 1U) << "the gap filled: one range again";
  EXPECT_EQ(allocator.stats().reserved_bytes[kAll].current, static_cast<std::int64_t>(24 * MiB));
  EXPECT_TRUE(testing::expandable_consistent(allocator));
  for (void* p : {a, c, d, e}) allocator.deallocate(p);
}

// No two free blocks side by side anywhere: freed neighbours are always merged.
::testing::AssertionResult free_neighbours_merged(const Snapshot& snap) {
  for (const SegmentInfo& s : snap.segments) {
    for (std::size_t i = 1; i < s.blocks.size(); ++i) {
      if (s.blocks[i - 1].state == BlockState::inactive &&
          s.blocks[i].state == BlockState::inactive) {
        return ::testing::AssertionFailure()
               << "free blocks at " << s.blocks[i - 1].address << " and " << s.blocks[i].address
               << " were not merged";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

TEST_F(ExpandableLayout, SplitPiecesMergeAgainThroughARandomSequence) {
  std::mt19937_64 rng(123548);
  const auto uniform = [&rng](std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
  };
  std::vector<void*> live;
  for (int step = 0; step < 4'000; ++step) {
    if (live.empty() || (live.size() < 64 && uniform(0, 1) == 0)) {
      // Sizes from 512 B to 48 MiB, two streams, both pools.
      const std::size_t size = uniform(0, 3) == 0 ? uniform(1, 1 * MiB) : uniform(1, 48 * MiB);
      live.push_back(allocator.allocate(size, uniform(0, 1)));
    } else {
      const std::size_t i = uniform(0, live.size() - 1);
      allocator.deallocate(live[i]);
      live[i] = live.back();
      live.pop_back();
    }
    if (step % 500 == 499) (void)allocator.empty_cache();
    const Snapshot snap = allocator.snapshot();
    ASSERT_TRUE(free_neighbours_merged(snap)) << "step " << step;
    ASSERT_TRUE(testing::expandable_consistent(allocator)) << "step " << step;
  }
  for (void* p : live) allocator.deallocate(p);
  const Snapshot snap = allocator.snapshot();
  ASSERT_FALSE(snap.segments.empty());
  for (const SegmentInfo& s : snap.segments) {
    ASSERT_EQ(s.blocks.size(), 1U) << "mapped range at " << s.address << " holds "
                                   << s.blocks.size() << " blocks with nothing live";
    EXPECT_EQ(s.blocks[0].state, BlockState::inactive);
  }
  EXPECT_EQ(allocator.stats().inactive_split[kAll].current, 0);
  (void)allocator.empty_cache();
  EXPECT_TRUE(allocator.snapshot().segments.empty());
  EXPECT_EQ(device->reserved_bytes(), 0U);
}

TEST(ExpandableLifetime, DestroyingTheAllocatorUnmapsEveryPageEvenUnderLiveBlocks) {
  auto device = std::make_shared<SimulatedBackend>(8 * GiB);
  {
    CachingAllocator allocator(device, AllocatorConfig::parse("expandable_segments:true"));
    (void)allocator.allocate(100 * MiB, /*stream=*/1);  // left live on purpose
    void* cached = allocator.allocate(30 * MiB, /*stream=*/2);
    (void)allocator.allocate(1000, /*stream=*/2);
    allocator.deallocate(cached);
    ASSERT_GT(device->mapped_bytes(), 0U);
  }
  EXPECT_EQ(device->mapped_bytes(), 0U);
  EXPECT_EQ(device->reserved_bytes(), 0U);
  EXPECT_EQ(device->free_bytes(), 8 * GiB);
}

}  // namespace
}  // namespace memscope

// Reclaim's policy through its own interface: the free-memory callbacks, garbage collection's
// target and its oldest-first rounds (over a real block store and fixed segments on the
// simulated device), which oversize segments make room at the limit, and when a release of
// everything cached can skip its walk. Cost: under 0.1 s.
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "allocator/allocator_statistics.hpp"
#include "allocator/block.hpp"
#include "allocator/block_store.hpp"
#include "allocator/fixed_segments.hpp"
#include "allocator/front_cache.hpp"
#include "allocator/reclaim.hpp"
#include "allocator/segment_source.hpp"
#include "memscope/config.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope::detail {
namespace {

AllocatorConfig with(double gc_threshold, std::size_t max_split_size) {
  AllocatorConfig config;
  config.garbage_collection_threshold = gc_threshold;
  config.max_split_size = max_split_size;
  return config;
}

TEST(Reclaim, CallsEveryCallbackAndSaysWhetherOneFreed) {
  Reclaim reclaim(with(0.0, AllocatorConfig::kUnlimited));
  EXPECT_FALSE(reclaim.call_free_memory_callbacks());
  int calls = 0;
  reclaim.add_free_memory_callback([&calls] { return ++calls == 1; });
  reclaim.add_free_memory_callback([&calls] { return ++calls < 0; });
  EXPECT_TRUE(reclaim.call_free_memory_callbacks());  // the first freed; the second still ran
  EXPECT_EQ(calls, 2);
  EXPECT_FALSE(reclaim.call_free_memory_callbacks());
  EXPECT_EQ(calls, 4);
}

TEST(Reclaim, GarbageTargetIsWhatLiesAboveTheThreshold) {
  EXPECT_FALSE(Reclaim(with(0.0, AllocatorConfig::kUnlimited)).collects_garbage());
  const Reclaim reclaim(with(0.5, AllocatorConfig::kUnlimited));
  EXPECT_TRUE(reclaim.collects_garbage());
  EXPECT_EQ(reclaim.garbage_target(40 * MiB, 100 * MiB), 0U);
  EXPECT_EQ(reclaim.garbage_target(50 * MiB, 100 * MiB), 0U);
  EXPECT_EQ(reclaim.garbage_target(70 * MiB, 100 * MiB), 20 * MiB);
}

TEST(Reclaim, CollectsTheOldestRoundByRoundUntilTheTarget) {
  // Ages at clock 100: 100, 50, 10, 5 (average 41.25), one MiB each.
  std::vector<Block> blocks(4);
  const std::uint64_t cached_at[] = {0, 50, 90, 95};
  std::vector<Block*> freeable;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    blocks[i].size = 1 * MiB;
    blocks[i].cached_at = cached_at[i];
    freeable.push_back(&blocks[i]);
  }
  std::vector<const Block*> released;
  const auto release = [&released](Block* b) {
    released.push_back(b);
    return b->size;
  };
  Reclaim::collect(freeable, 1 * MiB, 100, release);  // one round: both above the average
  EXPECT_EQ(released, (std::vector<const Block*>{&blocks[0], &blocks[1]}));
  EXPECT_EQ(freeable.size(), 2U);
  Reclaim::collect(freeable, 2 * MiB, 100, release);  // ages 10, 5: the older, then the last
  EXPECT_EQ(released, (std::vector<const Block*>{&blocks[0], &blocks[1], &blocks[2], &blocks[3]}));
  EXPECT_TRUE(freeable.empty());
}

TEST(Reclaim, OversizeSegmentsMakeRoomSmallestAloneElseBiggestFirst) {
  const Reclaim reclaim(with(0.0, 4 * MiB));
  EXPECT_TRUE(reclaim.limits_splits());
  EXPECT_FALSE(Reclaim(with(0.0, AllocatorConfig::kUnlimited)).limits_splits());
  std::vector<Block> blocks(3);
  blocks[0].size = 8 * MiB;
  blocks[1].size = 20 * MiB;
  blocks[2].size = 12 * MiB;
  std::vector<const Block*> released;
  const auto release = [&released](Block* b) {
    released.push_back(b);
    return b->size;
  };
  std::vector<Block*> oversize{&blocks[0], &blocks[1], &blocks[2]};
  EXPECT_TRUE(reclaim.release_oversize(oversize, 10 * MiB, release));  // 12 MiB alone fits
  EXPECT_EQ(released, std::vector<const Block*>{&blocks[2]});
  released.clear();
  oversize = {&blocks[0], &blocks[1], &blocks[2]};
  EXPECT_TRUE(reclaim.release_oversize(oversize, 30 * MiB, release));  // 20 + 12
  EXPECT_EQ(released, (std::vector<const Block*>{&blocks[1], &blocks[2]}));
  released.clear();
  oversize = {&blocks[0], &blocks[1], &blocks[2]};
  EXPECT_FALSE(reclaim.release_oversize(oversize, 64 * MiB, release));  // all 40 MiB: too few
  EXPECT_EQ(released.size(), 3U);
}

TEST(Reclaim, AReleaseWalkIsSkippedWithoutAFreeSinceTheLastOneWithFixedSegmentsOnly) {
  Reclaim fixed(with(0.0, AllocatorConfig::kUnlimited));
  EXPECT_FALSE(fixed.release_finds_nothing(0));  // never walked
  fixed.released(5);
  EXPECT_TRUE(fixed.release_finds_nothing(5));
  EXPECT_FALSE(fixed.release_finds_nothing(6));
  AllocatorConfig config = with(0.0, AllocatorConfig::kUnlimited);
  config.expandable_segments = true;
  Reclaim expandable(config);
  expandable.released(5);
  EXPECT_FALSE(expandable.release_finds_nothing(5));
}

// Fixed segments ask nothing of a core for what this test does.
class NoHost final : public SourceHost {
 public:
  void flush_front_caches() noexcept override {}
  void record_segment_event(TraceAction /*action*/, std::uintptr_t /*address*/,
                            std::size_t /*bytes*/, StreamId /*stream*/) noexcept override {}
};

TEST(Reclaim, GarbageCollectionGivesBackTheOldestWholeLargeSegmentsOfEveryStream) {
  const AllocatorConfig config = with(0.5, AllocatorConfig::kUnlimited);
  SimulatedBackend device(1 * GiB);
  BlockStore store(false);
  AllocatorStatistics statistics(config.max_split_size);
  Reclaim reclaim(config);
  NoHost host;
  const std::size_t limit = 1 * GiB;
  FixedSegments source(device, store, statistics, reclaim, host, limit, false);
  const auto cached_segment = [&](StreamId stream, std::size_t rounded, std::uint64_t at) {
    store.prepare(2, 1);
    Block* b = source.grow(store.pools_for(stream), rounded <= 1 * MiB, rounded);
    b->cached_at = at;
    FrontCache::cache_in_bins(b);
    return b;
  };
  (void)cached_segment(1, 20 * MiB, 1);  // age 9
  (void)cached_segment(2, 20 * MiB, 2);  // age 8
  Block* young = cached_segment(1, 20 * MiB, 9);
  Block* small = cached_segment(2, 4096, 0);  // the oldest, but collection frees large memory
  // Ages 9, 8 and 1 average 6: the first round gives back the two oldest, 40 MiB, enough.
  Reclaim::collect_garbage(store, source, 30 * MiB, 10);
  EXPECT_EQ(device.reserved_bytes(), young->size + small->size);
  EXPECT_EQ(statistics.reserved_bytes(), static_cast<std::int64_t>(young->size + small->size));
  // A second collection takes what is left of the large pool, however young.
  Reclaim::collect_garbage(store, source, 1, 10);
  EXPECT_EQ(device.reserved_bytes(), small->size);
}

}  // namespace
}  // namespace memscope::detail

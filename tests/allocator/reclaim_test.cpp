// Reclaim's policy through its own interface: the free-memory callbacks, garbage collection's
// target and its oldest-first rounds, and which oversize segments make room at the limit.
// Cost: under 0.1 s.
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "allocator/block.hpp"
#include "allocator/reclaim.hpp"
#include "memscope/config.hpp"
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

}  // namespace
}  // namespace memscope::detail

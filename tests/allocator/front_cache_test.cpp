// FrontCache through its own interface, on hand-built segments of real Blocks and FreeBins:
// filing, taking back only the newest of the exact size, evicting the oldest, flushing in the
// order freed (every stream's only after a free), the placement question it asks the bins
// (expandable and fixed segments) on the slow path's hit and at a slow free, the marks caching a
// neighbour leaves, and its "recent" checker. Cost: under 0.1 s.
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "allocator/block.hpp"
#include "allocator/block_store.hpp"
#include "allocator/free_bins.hpp"
#include "allocator/front_cache.hpp"
#include "memscope/errors.hpp"

namespace memscope::detail {
namespace {

constexpr std::size_t kBlock = 4096;

// A fixed segment of the small pool tiled by kCount allocated blocks of kBlock bytes.
class FrontCacheTest : public ::testing::Test {
 protected:
  static constexpr std::size_t kCount = 10;
  FrontCacheTest() {
    segment_.base = 0x100000;
    segment_.size = kCount * kBlock;
    segment_.small_pool = true;
    segment_.bins = &bins_;
    segment_.recent = &recent_;
    segment_.first = &blocks_[0];
    for (std::size_t i = 0; i < kCount; ++i) {
      Block& b = blocks_[i];
      b.address = segment_.base + i * kBlock;
      b.size = kBlock;
      b.segment = &segment_;
      b.use.allocated = true;
      b.prev = i == 0 ? nullptr : &blocks_[i - 1];
      b.next = i + 1 == kCount ? nullptr : &blocks_[i + 1];
    }
  }
  // Freed into the front cache as the core files it.
  void file(Block& b) {
    b.use.allocated = false;
    FrontCache::file(&b, recent_);
  }
  void cache(Block& b) {
    b.use.allocated = false;
    FrontCache::mark_neighbours(&b, bins_);
    bins_.insert(&b);
  }

  FreeBins bins_{true};
  RecentFrees recent_;
  Segment segment_;
  std::array<Block, kCount> blocks_;
};

TEST_F(FrontCacheTest, TakesBackOnlyTheNewestOfTheExactSize) {
  file(blocks_[0]);
  file(blocks_[2]);
  EXPECT_TRUE(blocks_[2].recent);
  EXPECT_EQ(FrontCache::take_newest(recent_, 2 * kBlock), nullptr);
  EXPECT_EQ(recent_.count, 2U);
  EXPECT_EQ(FrontCache::take_newest(recent_, kBlock), &blocks_[2]);
  EXPECT_FALSE(blocks_[2].recent);
  EXPECT_EQ(recent_.count, 1U);
  EXPECT_EQ(FrontCache::take_newest(recent_, kBlock), &blocks_[0]);
  EXPECT_EQ(recent_.count, 0U);
}

TEST_F(FrontCacheTest, AFullListGivesUpItsOldest) {
  for (std::size_t i = 0; i < RecentFrees::kCapacity; ++i) {
    EXPECT_EQ(FrontCache::make_room(recent_), nullptr);
    file(blocks_[i]);
  }
  EXPECT_EQ(FrontCache::make_room(recent_), &blocks_[0]);
  EXPECT_EQ(recent_.count, RecentFrees::kCapacity - 1);
  EXPECT_EQ(recent_.blocks[0], &blocks_[1]);
  file(blocks_[RecentFrees::kCapacity]);
  EXPECT_EQ(recent_.blocks[RecentFrees::kCapacity - 1], &blocks_[RecentFrees::kCapacity]);
}

TEST_F(FrontCacheTest, FlushesInTheOrderFreedAndOnlyThoseOfTheBinsAsked) {
  FreeBins other_bins{false};
  Segment other = segment_;
  other.bins = &other_bins;
  blocks_[5].segment = &other;
  for (const std::size_t i : std::array<std::size_t, 4>{3, 5, 1, 7}) file(blocks_[i]);
  std::vector<const Block*> merged;
  const auto merge = [&merged](Block* b) { merged.push_back(b); };
  FrontCache::flush_into(recent_, other_bins, merge);
  EXPECT_EQ(merged, std::vector<const Block*>{&blocks_[5]});
  ASSERT_EQ(recent_.count, 3U);
  EXPECT_EQ(recent_.blocks[1], &blocks_[1]);  // the others keep their order
  merged.clear();
  FrontCache::flush(recent_, merge);
  EXPECT_EQ(merged, (std::vector<const Block*>{&blocks_[3], &blocks_[1], &blocks_[7]}));
  EXPECT_EQ(recent_.count, 0U);
}

TEST_F(FrontCacheTest, FlushesEveryStreamsListOnlyWhenAFreeWasMadeSinceItsLastWalk) {
  BlockStore store(false);
  RecentFrees& one = store.pools_for(1).recent;
  RecentFrees& two = store.pools_for(2).recent;
  EXPECT_FALSE(FrontCache::any(store));
  blocks_[0].use.allocated = false;
  FrontCache::file(&blocks_[0], one);
  blocks_[4].use.allocated = false;
  FrontCache::file(&blocks_[4], two);
  EXPECT_TRUE(FrontCache::any(store));
  FrontCache cache;
  std::vector<const Block*> merged;
  const auto merge = [&merged](Block* b) { merged.push_back(b); };
  EXPECT_TRUE(cache.flush_all(store, 2, merge));
  EXPECT_EQ(merged.size(), 2U);
  EXPECT_EQ(one.count + two.count, 0U);
  EXPECT_FALSE(FrontCache::any(store));
  // No free since: no walk, even over a list filled behind its back.
  FrontCache::file(&blocks_[6], one);
  EXPECT_FALSE(cache.flush_all(store, 2, merge));
  EXPECT_EQ(one.count, 1U);
  EXPECT_TRUE(cache.flush_all(store, 3, merge));
  EXPECT_EQ(merged.back(), &blocks_[6]);
}

TEST_F(FrontCacheTest, KeepsPlacementOnlyWhereBestFitWouldPutItToo) {
  file(blocks_[4]);
  EXPECT_TRUE(FrontCache::keeps_placement(&blocks_[4]));  // allocated neighbours, empty bins
  cache(blocks_[7]);  // a block of its size, above it: best fit takes the lower one
  EXPECT_TRUE(FrontCache::keeps_placement(&blocks_[4]));
  cache(blocks_[1]);  // ... and one below it: best fit would take that
  EXPECT_FALSE(FrontCache::keeps_placement(&blocks_[4]));
  file(blocks_[8]);  // a free block before it: merged, the block would start lower
  EXPECT_FALSE(FrontCache::keeps_placement(&blocks_[8]));
  file(blocks_[5]);  // a recent neighbour after block 4
  EXPECT_FALSE(FrontCache::keeps_placement(&blocks_[4]));
}

TEST_F(FrontCacheTest, TheSlowPathTakesTheNewestOnlyWhereBestFitWouldPlaceIt) {
  std::vector<const Block*> merged;
  const auto merge = [&merged](Block* b) { merged.push_back(b); };
  EXPECT_EQ(FrontCache::take_placed(recent_, kBlock, false, merge), nullptr);  // empty list
  file(blocks_[2]);
  file(blocks_[6]);
  EXPECT_EQ(FrontCache::take_placed(recent_, 2 * kBlock, false, merge), nullptr);  // wrong size
  EXPECT_TRUE(merged.empty());
  EXPECT_EQ(recent_.count, 2U);
  // The older one of its pool is merged first; the newest keeps placement and is taken.
  EXPECT_EQ(FrontCache::take_placed(recent_, kBlock, false, merge), &blocks_[6]);
  EXPECT_EQ(merged, std::vector<const Block*>{&blocks_[2]});
  EXPECT_EQ(recent_.count, 0U);
  // Placement by address space decides instead: the block goes to merge() as well.
  merged.clear();
  file(blocks_[6]);
  EXPECT_EQ(FrontCache::take_placed(recent_, kBlock, true, merge), nullptr);
  EXPECT_EQ(merged, std::vector<const Block*>{&blocks_[6]});
  // A block of its size cached below it: best fit would take that one.
  merged.clear();
  cache(blocks_[1]);
  file(blocks_[6]);
  EXPECT_EQ(FrontCache::take_placed(recent_, kBlock, false, merge), nullptr);
  EXPECT_EQ(merged, std::vector<const Block*>{&blocks_[6]});
}

TEST_F(FrontCacheTest, ASlowFreeIsAdmittedOnlyWherePlacementStaysAndNeverWhenBypassed) {
  FrontCache cache;
  std::vector<const Block*> merged;
  const auto merge = [&merged](Block* b) { merged.push_back(b); };
  file(blocks_[2]);
  blocks_[6].use.allocated = false;
  EXPECT_TRUE(cache.admits(&blocks_[6], false, false, merge));
  EXPECT_EQ(merged, std::vector<const Block*>{&blocks_[2]});  // its pool's list merged first
  EXPECT_EQ(recent_.count, 0U);
  blocks_[6].pending_events = 1;  // waits for a stream: the bins, later
  EXPECT_FALSE(cache.admits(&blocks_[6], false, false, merge));
  blocks_[6].pending_events = 0;
  // Expandable segments: not while a block waits, nor where best fit would place elsewhere.
  EXPECT_TRUE(cache.admits(&blocks_[6], true, false, merge));
  EXPECT_FALSE(cache.admits(&blocks_[6], true, true, merge));
  cache.bypass(true);
  EXPECT_FALSE(cache.admits(&blocks_[6], false, false, merge));
  cache.bypass(false);
  this->cache(blocks_[1]);  // a block of its size below it
  EXPECT_FALSE(cache.admits(&blocks_[6], true, false, merge));
  EXPECT_TRUE(cache.admits(&blocks_[6], false, false, merge));  // fixed: only the marks ask
  this->cache(blocks_[5]);  // its previous neighbour cached: a merge would start lower
  EXPECT_FALSE(cache.admits(&blocks_[6], false, false, merge));
}

TEST_F(FrontCacheTest, CachingANeighbourMarksTheFreesThatMustAsk) {
  cache(blocks_[5]);
  EXPECT_NE(blocks_[4].use.slow_free & Block::kNextCached, 0);
  EXPECT_NE(blocks_[6].use.slow_free & Block::kPrevCached, 0);
  EXPECT_FALSE(FrontCache::keeps_fixed_placement(&blocks_[6]));  // its previous is cached
  // Block 5 alone in the bins: best fit would split the merged block where a hit takes 4.
  blocks_[4].use.allocated = false;
  EXPECT_TRUE(FrontCache::keeps_fixed_placement(&blocks_[4]));
  EXPECT_EQ(blocks_[4].use.slow_free, 0);  // the reason is gone: the mark with it
  blocks_[4].mark_slow_free(Block::kNextCached);
  cache(blocks_[8]);  // another cached block: best fit may now choose elsewhere
  EXPECT_FALSE(FrontCache::keeps_fixed_placement(&blocks_[4]));
  // Expandable segments keep placement through their FrontCacheRoom: no marks.
  segment_.expandable = true;
  blocks_[1].use.slow_free = 0;
  cache(blocks_[2]);
  EXPECT_EQ(blocks_[1].use.slow_free, 0);
}

TEST_F(FrontCacheTest, TheCheckerNamesABlockListedByAStreamItDoesNotFileTo) {
  file(blocks_[0]);
  const FrontCache front_cache;
  std::vector<const Block*> listed;
  EXPECT_NO_THROW(front_cache.check(recent_, 1, listed));
  EXPECT_EQ(listed, std::vector<const Block*>{&blocks_[0]});
  RecentFrees other;
  other.blocks[other.count++] = &blocks_[0];  // its segment files into recent_, not here
  try {
    front_cache.check(other, 2, listed);
    ADD_FAILURE() << "a block listed by another stream passed";
  } catch (const InternalError& e) {
    EXPECT_EQ(e.invariant(), "recent");
  }
}

TEST_F(FrontCacheTest, TheMarksCheckerNamesABlockWhoseFreeCouldMisplace) {
  cache(blocks_[5]);
  cache(blocks_[8]);  // two cached blocks: best fit may choose between them
  EXPECT_NO_THROW(FrontCache::check_marks(blocks_[4], &blocks_[3]));
  EXPECT_NO_THROW(FrontCache::check_marks(blocks_[6], &blocks_[5]));
  for (Block* b : {&blocks_[4], &blocks_[6]}) {
    const std::uint8_t marks = b->use.slow_free;
    b->use.slow_free = 0;  // as if caching its neighbour had not marked it
    try {
      FrontCache::check_marks(*b, b->prev);
      ADD_FAILURE() << "an unmarked neighbour of a cached block passed";
    } catch (const InternalError& e) {
      EXPECT_EQ(e.invariant(), "block-state");
    }
    b->use.slow_free = marks;
  }
}

TEST_F(FrontCacheTest, TheRoomCheckerNamesASegmentWithTheWrongRoom) {
  EXPECT_NO_THROW(FrontCache::check_room(segment_, nullptr));  // fixed: the default room
  segment_.room = kClosedRoom;
  try {
    FrontCache::check_room(segment_, nullptr);
    ADD_FAILURE() << "a fixed segment with a closed room passed";
  } catch (const InternalError& e) {
    EXPECT_EQ(e.invariant(), "front-cache");
  }
  segment_.expandable = true;  // closed is right for an expandable segment no pool grows
  EXPECT_NO_THROW(FrontCache::check_room(segment_, nullptr));
}

}  // namespace
}  // namespace memscope::detail

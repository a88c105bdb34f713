// BlockStore through its own interface: each stream's pools (made on first use, the last used
// kept, the unused dropped), segments filed and forgotten with their blocks, split and join,
// the layout snapshot() shows (an expandable segment's mapped runs as segments), and its
// page-donor checker. No backend: the store calls none. Cost: under 0.1 s.
#include <gtest/gtest.h>

#include <cstdint>

#include "allocator/block_store.hpp"
#include "memscope/errors.hpp"
#include "memscope/stats.hpp"
#include "memscope/units.hpp"

namespace memscope::detail {
namespace {

void* at(std::uintptr_t address) {
  return reinterpret_cast<void*>(address);  // NOLINT(performance-no-int-to-ptr)
}

TEST(BlockStore, PoolsAreMadeOnFirstUseAndDroppedWhenUnused) {
  BlockStore store(false);
  EXPECT_EQ(store.last_pools(), store.no_pools());
  EXPECT_EQ(store.pools_of(7), nullptr);
  StreamPools& seven = store.pools_for(7);
  EXPECT_EQ(seven.stream, 7U);
  EXPECT_EQ(store.last_pools(), &seven);
  EXPECT_EQ(&store.pools_for(7), &seven);
  (void)store.pools_for(8);
  EXPECT_EQ(store.stream_count(), 2U);
  store.prepare(1, 1);
  Segment* s = store.add_segment(seven, true, at(0x200000), 2 * MiB);
  EXPECT_EQ(seven.segments, 1U);
  store.drop_unused_pools();  // 8 is the last used: kept, though it has no segment
  EXPECT_EQ(store.stream_count(), 2U);
  (void)store.pools_for(7);
  store.drop_pools_if_unused(8);
  EXPECT_EQ(store.pools_of(8), nullptr);
  store.forget_segment(s);
  EXPECT_EQ(seven.segments, 0U);
  EXPECT_EQ(store.segments(), nullptr);
  store.drop_unused_pools();  // 7 is the last used
  EXPECT_EQ(store.stream_count(), 1U);
}

TEST(BlockStore, SegmentsAreTiledBySplitAndJoinedBlocks) {
  BlockStore store(false);
  StreamPools& pools = store.pools_for(1);
  store.prepare(2, 2);
  Segment* a = store.add_segment(pools, false, at(0x1000000), 4 * MiB);
  Segment* b = store.add_segment(pools, true, at(0x2000000), 2 * MiB);
  EXPECT_EQ(store.segments(), b);  // newest first
  EXPECT_EQ(b->next, a);
  EXPECT_EQ(a->bins, &pools.large);
  EXPECT_EQ(b->recent, &pools.recent);
  EXPECT_EQ(b->stat_pool, static_cast<std::uint8_t>(StatPool::small));
  Block* first = a->first;
  store.prepare(1);
  Block* rest = store.split_at(first, first->address + 1 * MiB);
  EXPECT_EQ(first->size, 1 * MiB);
  EXPECT_EQ(rest->size, 3 * MiB);
  EXPECT_EQ(rest->prev, first);
  EXPECT_EQ(first->next, rest);
  first->use.allocated = true;
  first->requested_size = 1000;
  const Snapshot snap = store.layout();
  ASSERT_EQ(snap.segments.size(), 2U);
  EXPECT_EQ(snap.segments[0].address, a->base);  // in address order
  ASSERT_EQ(snap.segments[0].blocks.size(), 2U);
  EXPECT_EQ(snap.segments[0].allocated_size, 1 * MiB);
  EXPECT_EQ(snap.segments[0].requested_size, 1000U);
  first->use.allocated = false;
  first->requested_size = 0;
  EXPECT_EQ(store.join(first, rest), first);
  EXPECT_EQ(first->size, 4 * MiB);
  EXPECT_EQ(first->next, nullptr);
  store.forget_segment(b);
  EXPECT_EQ(store.segments(), a);
  EXPECT_EQ(a->prev, nullptr);
}

TEST(BlockStore, AnExpandableSegmentShowsItsMappedRuns) {
  BlockStore store(true);
  StreamPools& pools = store.pools_for(1);
  store.prepare(3, 1);
  Segment* s = store.add_segment(pools, false, at(0x4000000), 8 * MiB);
  s->expandable = true;
  Block* mapped = s->first;
  Block* hole = store.split_at(mapped, s->base + 2 * MiB);
  Block* tail = store.split_at(hole, s->base + 4 * MiB);
  hole->unmapped = true;
  (void)tail;
  const Snapshot snap = store.layout();
  ASSERT_EQ(snap.segments.size(), 2U);
  EXPECT_EQ(snap.segments[0].total_size, 2 * MiB);
  EXPECT_EQ(snap.segments[1].address, s->base + 4 * MiB);
  EXPECT_TRUE(snap.segments[1].is_expandable);
}

TEST(BlockStore, AFreeBlockMergesWithItsCachedNeighboursAndSaysWhatInactiveSplitLost) {
  BlockStore store(false);
  StreamPools& pools = store.pools_for(1);
  store.prepare(4, 1);
  Segment* s = store.add_segment(pools, false, at(0x8000000), 8 * MiB);
  Block* low = s->first;
  Block* freed = store.split_at(low, s->base + 1 * MiB);
  Block* high = store.split_at(freed, s->base + 3 * MiB);
  Block* live = store.split_at(high, s->base + 4 * MiB);
  live->use.allocated = true;
  pools.large.insert(low);
  freed->requested_size = 2 * MiB;
  freed->pending_events = 1;
  // Only the lower neighbour is cached: one split block (1 MiB) out, the merged one (3 MiB) in.
  const Merged first = store.merge_free(freed, 42);
  EXPECT_EQ(first.block, low);
  EXPECT_EQ(low->size, 3 * MiB);
  EXPECT_EQ(low->next, high);
  EXPECT_EQ(low->requested_size, 0U);
  EXPECT_EQ(low->pending_events, 0U);
  EXPECT_EQ(low->cached_at, 42U);
  EXPECT_EQ(pools.large.count(), 0U);  // the neighbour left the bins; the caller files the rest
  EXPECT_EQ(first.split_blocks, 0);
  EXPECT_EQ(first.split_bytes, static_cast<std::int64_t>(2 * MiB));
  // Both neighbours cached and nothing after them: the whole segment, no split block left.
  pools.large.insert(low);
  live->use.allocated = false;
  pools.large.insert(live);
  const Merged second = store.merge_free(high, 43);
  EXPECT_EQ(second.block, low);
  EXPECT_EQ(low->size, 8 * MiB);
  EXPECT_EQ(low->next, nullptr);
  EXPECT_EQ(pools.large.count(), 0U);
  EXPECT_EQ(second.split_blocks, -2);
  EXPECT_EQ(second.split_bytes, -static_cast<std::int64_t>(3 * MiB + 4 * MiB));
}

TEST(BlockStore, PageDonorsAreListedAsTheSettingSays) {
  BlockStore store(true);
  StreamPools& pools = store.pools_for(3);
  EXPECT_EQ(pools.small.donors(), &store.page_donors(true));
  EXPECT_EQ(pools.large.donors(), &store.page_donors(false));
  EXPECT_NO_THROW(store.check_page_donors());
  pools.large.list_in(nullptr);  // as if the setting said no recycling
  try {
    store.check_page_donors();
    ADD_FAILURE() << "bins not listed for page recycling passed";
  } catch (const InternalError& e) {
    EXPECT_EQ(e.invariant(), "free-bins");
  }
  pools.large.list_in(&store.page_donors(false));
  BlockStore fixed(false);
  EXPECT_EQ(fixed.pools_for(3).small.donors(), nullptr);
  EXPECT_NO_THROW(fixed.check_page_donors());
}

}  // namespace
}  // namespace memscope::detail

// CachingAllocator::validate(): it passes through a scripted scenario that visits every kind of
// state (splits, merges, pending frees, oversize blocks, empty_cache), and it catches each kind
// of corruption, named, when a test breaks the core's bookkeeping on purpose.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "allocator/allocator_core.hpp"
#include "core_test_access.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/errors.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

using Access = AllocatorCoreTestAccess;

// The invariant validate() names, or "" when it passes.
std::string broken_invariant(const AllocatorCore& core) {
  try {
    core.validate();
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find(e.invariant()), std::string::npos) << e.what();
    return e.invariant();
  }
  return "";
}

class BrokenCore : public ::testing::Test {
 protected:
  BrokenCore() : device_(std::make_shared<SimulatedBackend>(8 * GiB)), core_(*device_, config_) {
    // A small segment holding a, b, c and a cached remainder.
    a_ = allocate(4096);
    b_ = allocate(8192);
    c_ = allocate(4096);
  }

  void* allocate(std::size_t bytes) { return core_.allocate(bytes, kDefaultStream); }

  AllocatorConfig config_;
  std::shared_ptr<SimulatedBackend> device_;
  AllocatorCore core_;
  void* a_ = nullptr;
  void* b_ = nullptr;
  void* c_ = nullptr;
};

TEST_F(BrokenCore, IntactStatePasses) {
  EXPECT_EQ(broken_invariant(core_), "");
  ASSERT_TRUE(core_.deallocate(b_));  // a cached block between two allocated ones
  EXPECT_EQ(broken_invariant(core_), "");
}

TEST_F(BrokenCore, StatisticsThatDisagreeWithTheBlocks) {
  Access::stats(core_).allocated_bytes[0].current += 512;
  EXPECT_EQ(broken_invariant(core_), "statistics");
  Access::stats(core_).allocated_bytes[0].current -= 512;
  Access::stats(core_).allocation[1].peak = 0;  // small pool: current 3, above its peak
  EXPECT_EQ(broken_invariant(core_), "statistics");
  Access::stats(core_).allocation[1].peak = 3;
  EXPECT_EQ(broken_invariant(core_), "");
  // Active is derived from allocation and the waiting blocks: a waiting block no block has.
  Access::waiting(core_)[0].current += 1;
  EXPECT_EQ(broken_invariant(core_), "statistics");
}

// The hot path tests one word for everything that sends a call the whole way (hooks, waiting
// blocks, settings); a word that says "nothing" while something is there would skip it.
TEST_F(BrokenCore, AHotPathGateThatForgotWhatItGuards) {
  Access::off_hot_path(core_) = 0;
  EXPECT_EQ(broken_invariant(core_), "");  // nothing waits, no hooks, default settings
  Access::off_hot_path(core_) = 4;         // says blocks wait: none do
  EXPECT_EQ(broken_invariant(core_), "hot-path-gate");
  Access::off_hot_path(core_) = 0;
  {
    PeakScope::Windows::Window window;
    core_.open_window(window);  // a hook: the gate says so
    EXPECT_NE(Access::off_hot_path(core_), 0U);
    EXPECT_EQ(broken_invariant(core_), "");
    Access::off_hot_path(core_) = 0;
    EXPECT_EQ(broken_invariant(core_), "hot-path-gate");
    core_.close_window(window);
  }
  EXPECT_EQ(Access::off_hot_path(core_), 0U);
  EXPECT_EQ(broken_invariant(core_), "");
}

TEST_F(BrokenCore, ABlockThatNoLongerTilesItsSegment) {
  detail::Block* b = Access::block(core_, b_);
  b->size += 512;  // overlaps c
  EXPECT_EQ(broken_invariant(core_), "tiling");
  b->size -= 512;
  detail::Block* c = b->next;
  b->next = nullptr;  // the segment ends early
  EXPECT_EQ(broken_invariant(core_), "tiling");
  b->next = c;
  c->prev = Access::block(core_, a_);  // links that disagree
  EXPECT_EQ(broken_invariant(core_), "tiling");
  c->prev = b;
  EXPECT_EQ(broken_invariant(core_), "");
}

TEST_F(BrokenCore, ACachedBlockMissingFromTheFreeBins) {
  ASSERT_TRUE(core_.deallocate(b_));
  core_.flush_recent();  // from the front cache into the bins
  detail::Block* a = Access::block(core_, a_);
  detail::Block* b = a->next;
  ASSERT_TRUE(b->cached);
  b->segment->bins->remove(b);  // gone from the bins ...
  b->cached = true;             // ... but still marked cached
  EXPECT_EQ(broken_invariant(core_), "free-bins");
  b->cached = false;
  b->segment->bins->insert(b);
  EXPECT_EQ(broken_invariant(core_), "");
}

TEST_F(BrokenCore, ARecentBlockTheFrontCacheLost) {
  ASSERT_TRUE(core_.deallocate(b_));
  detail::Block* b = Access::block(core_, a_)->next;
  ASSERT_TRUE(b->recent);
  ASSERT_EQ(b->segment->recent->count, 1U);
  EXPECT_EQ(broken_invariant(core_), "");
  b->segment->recent->count = 0;  // the list forgets it
  EXPECT_EQ(broken_invariant(core_), "recent");
  b->segment->recent->count = 1;
  b->recent = false;  // the block forgets it
  EXPECT_EQ(broken_invariant(core_), "block-state");
  b->recent = true;
  EXPECT_EQ(broken_invariant(core_), "");
  core_.flush_recent();
  EXPECT_TRUE(b->cached || !b->recent);  // merged into its neighbour or cached itself
  EXPECT_EQ(broken_invariant(core_), "");
}

TEST_F(BrokenCore, AnAllocatedBlockInTheFreeBins) {
  detail::Block* b = Access::block(core_, b_);
  b->segment->bins->insert(b);  // sets cached: allocated and cached at once
  EXPECT_EQ(broken_invariant(core_), "block-state");
  b->segment->bins->remove(b);  // unlinks it and clears cached
  EXPECT_EQ(broken_invariant(core_), "");
}

TEST_F(BrokenCore, APointerMapThatLostABlock) {
  detail::Block* b = Access::block(core_, b_);
  ASSERT_EQ(Access::live(core_).erase(b->address), b);
  EXPECT_EQ(broken_invariant(core_), "pointer-map");
  Access::live(core_).insert(b->address, b);
  Access::live(core_).insert(b->address + 1 * MiB, b);  // an entry for no allocated block
  EXPECT_EQ(broken_invariant(core_), "pointer-map");
  (void)Access::live(core_).erase(b->address + 1 * MiB);
  EXPECT_EQ(broken_invariant(core_), "");
}

// A scenario through every kind of state, with validate() after each step.
TEST_F(BrokenCore, AStreamThatMiscountsItsSegments) {
  ++Access::segment_count(core_, kDefaultStream);
  EXPECT_EQ(broken_invariant(core_), "stream-pools");
}

// Per-stream state: a stream with no segments costs nothing after empty_cache(), however many
// streams came and went (each used to keep about 38 KiB, and finding a stream was a linear
// scan: 20,000 streams took seconds and 770 MiB).
TEST(Validate, FrontCacheRoomsFollowTheBinsOfExpandableSegments) {
  // The free's hot path files a block by its segment's room: it must say what the bins hold.
  auto device = std::make_shared<SimulatedBackend>(8 * GiB);
  AllocatorConfig config;
  config.expandable_segments = true;
  AllocatorCore core(*device, config);
  void* a = core.allocate(4096, kDefaultStream);
  void* b = core.allocate(4096, kDefaultStream);
  detail::Block* block = Access::block(core, b);
  detail::Segment* segment = block->segment;
  // The page's rest after b is the bins' only block: b's free keeps placement, a's would not.
  ASSERT_EQ(segment->bins->count(), 1U);
  EXPECT_EQ(segment->room.limit, 0U);
  EXPECT_EQ(segment->room.next, reinterpret_cast<std::uintptr_t>(block->next));
  EXPECT_EQ(broken_invariant(core), "");
  segment->room.limit = 1;  // as if the bins were empty
  EXPECT_EQ(broken_invariant(core), "front-cache");
  segment->room.limit = 0;
  EXPECT_EQ(broken_invariant(core), "");
  ASSERT_TRUE(core.deallocate(b));  // hot: into the front cache, the bins unchanged
  EXPECT_TRUE(block->recent);
  EXPECT_EQ(broken_invariant(core), "");
  ASSERT_TRUE(core.deallocate(a));  // not alone: merged into the bins with b and the rest
  core.flush_recent();
  EXPECT_EQ(segment->bins->count(), 1U);
  EXPECT_EQ(broken_invariant(core), "");
  EXPECT_GT(core.empty_cache(), 0U);
  EXPECT_EQ(broken_invariant(core), "");
}

TEST(StreamPools, StreamsWithoutBlocksAreDroppedByEmptyCache) {
  auto device = std::make_shared<SimulatedBackend>(64 * GiB);
  AllocatorCore core(*device, AllocatorConfig{});
  constexpr StreamId kStreams = 20000;
  for (StreamId s = 1; s <= kStreams; ++s) {
    void* p = core.allocate(4096, s);
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(core.deallocate(p));
  }
  EXPECT_EQ(core.block_store().stream_count(), kStreams);
  EXPECT_EQ(core.empty_cache(), kStreams * 2 * MiB);
  EXPECT_LE(core.block_store().stream_count(), 1U);  // at most the last one used, kept
  EXPECT_EQ(core.stats().reserved_bytes[0].current, 0);
  EXPECT_NO_THROW(core.validate());
  // The streams still work, and come back as they are used.
  void* p = core.allocate(4096, 17);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(core.deallocate(p));
  EXPECT_NO_THROW(core.validate());
}

TEST(StreamPools, AStreamWithBlocksKeepsItsPools) {
  auto device = std::make_shared<SimulatedBackend>(8 * GiB);
  AllocatorCore core(*device, AllocatorConfig{});
  void* held = core.allocate(4096, 5);      // keeps stream 5's small segment
  void* large = core.allocate(8 * MiB, 6);  // keeps stream 6's large segment
  void* gone = core.allocate(4096, 7);      // stream 7 empties entirely
  void* last = core.allocate(3 * MiB, 8);   // the last stream used
  ASSERT_TRUE(held && large && gone && last);
  ASSERT_TRUE(core.deallocate(gone));
  ASSERT_TRUE(core.deallocate(last));
  core.empty_cache();
  EXPECT_EQ(core.block_store().stream_count(), 3U);  // 5 and 6 (blocks), 8 (last used, kept)
  EXPECT_NO_THROW(core.validate());
  // Their blocks go back to their own pools and are reused from there.
  ASSERT_TRUE(core.deallocate(held));
  void* again = core.allocate(4096, 5);
  EXPECT_EQ(again, held);
  ASSERT_TRUE(core.deallocate(again));
  ASSERT_TRUE(core.deallocate(large));
  EXPECT_NO_THROW(core.validate());
  const auto reserved = static_cast<std::size_t>(core.stats().reserved_bytes[0].current);
  EXPECT_EQ(reserved, 2 * MiB + 20 * MiB);  // a small segment and a 20 MiB large one
  EXPECT_EQ(core.empty_cache(), reserved);
  EXPECT_LE(core.block_store().stream_count(), 1U);
  EXPECT_NO_THROW(core.validate());
}

// A free-memory callback may empty the cache while allocate() holds its stream's pools.
TEST(StreamPools, EmptyCacheInsideAllocateKeepsTheCallersPools) {
  auto device = std::make_shared<SimulatedBackend>(8 * GiB);
  AllocatorCore core(*device, AllocatorConfig{});
  for (StreamId s = 1; s <= 3; ++s) ASSERT_TRUE(core.deallocate(core.allocate(4096, s)));
  std::size_t calls = 0;
  core.add_free_memory_callback([&] {
    ++calls;
    core.empty_cache();
    return false;
  });
  void* p = core.allocate(4096, 9);  // misses: the callback drops every idle stream but 9
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(calls, 1U);
  EXPECT_EQ(core.block_store().stream_count(), 1U);
  EXPECT_NO_THROW(core.validate());
  EXPECT_TRUE(core.deallocate(p));
}

TEST(Validate, PassesThroughAScriptedScenario) {
  auto device = std::make_shared<SimulatedBackend>(8 * GiB);
  CachingAllocator allocator(device, AllocatorConfig::parse("max_split_size:64MiB"));
  const auto step = [&allocator](const char* what) {
    EXPECT_NO_THROW(allocator.validate()) << what;
  };
  step("empty");
  void* small1 = allocator.allocate(1000);
  void* small2 = allocator.allocate(3000);
  void* small3 = allocator.allocate(512);
  step("three small blocks split from one segment");
  allocator.deallocate(small2);
  step("a cached hole between two allocated blocks");
  allocator.deallocate(small1);
  step("merged with its right neighbour");
  void* large = allocator.allocate(5 * MiB);
  void* huge = allocator.allocate(100 * MiB);  // oversize: never split
  step("large and oversize");
  allocator.record_stream(large, 7);
  device->hold(7);
  allocator.deallocate(large);
  step("pending on a held stream");
  device->complete(7);
  void* again = allocator.allocate(2 * MiB);  // polls the event: the pending block is cached
  step("pending block cached after its stream finished");
  allocator.deallocate(huge);
  allocator.deallocate(small3);
  step("everything small cached");
  EXPECT_GT(allocator.empty_cache(), 0U);
  step("after empty_cache");
  allocator.deallocate(again);
  EXPECT_GT(allocator.empty_cache(), 0U);
  step("nothing left");
  EXPECT_EQ(allocator.stats().reserved_bytes[0].current, 0);
}

}  // namespace
}  // namespace memscope

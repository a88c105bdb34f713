// validate(): CachingAllocator's passes through a scripted scenario that visits every kind of
// state (splits, merges, pending frees, oversize blocks, empty_cache), and each invariant
// family is caught, named, by the checker of the component that owns it, on an instance the test
// builds and breaks through that component's own interface (no access to the core's privates).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "allocator/allocator_core.hpp"
#include "allocator/allocator_statistics.hpp"
#include "allocator/block_store.hpp"
#include "allocator/front_cache.hpp"
#include "allocator/hot_path_gate.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/errors.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

// The invariant `check` names, or "" when it passes.
template <class Check>
std::string broken_invariant_of(Check&& check) {
  try {
    check();
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find(e.invariant()), std::string::npos) << e.what();
    return e.invariant();
  }
  return "";
}

// The invariant validate() names, or "" when it passes.
std::string broken_invariant(const AllocatorCore& core) {
  return broken_invariant_of([&core] { core.validate(); });
}

// A BlockStore built by hand, as the core would leave it: one small segment (at an address no
// memory is behind: the store calls no backend) holding allocated blocks a, b and c and a
// cached remainder, and the statistics those blocks make. Each test breaks one part through
// the component's own interface and sees its checker name the invariant. Costs microseconds.
class BrokenStore : public ::testing::Test {
 protected:
  static constexpr std::uintptr_t kBase = std::uintptr_t{1} << 40;

  BrokenStore() : pools_(store_.pools_for(kDefaultStream)) {
    store_.prepare(8, 1);
    detail::Segment* segment =
        store_.add_segment(pools_, true, reinterpret_cast<void*>(kBase), 2 * MiB);
    a_ = segment->first;
    b_ = store_.split_at(a_, kBase + 4096);
    c_ = store_.split_at(b_, kBase + 4096 + 8192);
    rest_ = store_.split_at(c_, kBase + 4096 + 8192 + 4096);
    statistics_.count_segment(true, 2 * MiB);
    for (detail::Block* x : {a_, b_, c_}) {
      x->use.allocated = true;
      x->requested_size = x->size;
      store_.live().insert(x->address, x);
      statistics_.count_allocation(x->stat_pool(), x->size, x->requested_size);
    }
    detail::FrontCache::cache_in_bins(rest_);
    statistics_.change_split(true, 1, static_cast<std::int64_t>(rest_->size));
  }

  // What AllocatorCore::validate() asks of these components, in its order.
  std::string broken() {
    return broken_invariant_of([this] {
      detail::FrontCacheChecks checks;  // fixed segments: the page map has nothing to check
      detail::LayoutSummary summary = store_.check({&checks}, AllocatorConfig::kUnlimited);
      front_cache_.check(store_, summary.recent);
      store_.check_bins_hold_cached(summary);
      statistics_.check(summary.expected_statistics(false));
    });
  }
  // The statistics' figures as the blocks say they should be.
  [[nodiscard]] MemoryStats expected() const {
    detail::FrontCacheChecks checks;
    return store_.check({&checks}, AllocatorConfig::kUnlimited).expected_statistics(false);
  }
  // b freed the way the core's free does: out of use, into the bins merged with nothing (its
  // neighbours are allocated) and its neighbours marked, or into the front cache.
  void free_b_into_bins() {
    uncount_b();
    ASSERT_EQ(store_.live().erase(b_->address), b_);
    detail::FrontCache::cache_in_bins(b_);
    statistics_.change_split(true, 1, static_cast<std::int64_t>(b_->size));
  }
  void free_b_into_front_cache() {
    uncount_b();
    detail::FrontCache::file(b_, pools_.recent);
  }

  detail::BlockStore store_{false};
  detail::StreamPools& pools_;
  detail::FrontCache front_cache_;
  detail::AllocatorStatistics statistics_{AllocatorConfig::kUnlimited};
  detail::Block* a_ = nullptr;
  detail::Block* b_ = nullptr;
  detail::Block* c_ = nullptr;
  detail::Block* rest_ = nullptr;

 private:
  void uncount_b() {
    statistics_.uncount_allocation(b_->stat_pool(), b_->size);
    statistics_.uncount_requested(b_->stat_pool(), b_->requested_size);
    b_->use.allocated = false;
    b_->requested_size = 0;
  }
};

TEST_F(BrokenStore, IntactStatePasses) {
  EXPECT_EQ(broken(), "");
  free_b_into_bins();  // a cached block between two allocated ones
  EXPECT_EQ(broken(), "");
}

TEST_F(BrokenStore, StatisticsThatDisagreeWithTheBlocks) {
  const auto small = static_cast<std::size_t>(StatPool::small);
  statistics_.count_allocation(small, 512, 0);  // an allocation no block holds
  EXPECT_EQ(broken(), "statistics");
  statistics_.uncount_allocation(small, 512);
  EXPECT_EQ(broken(), "");
  // A current above its peak (small pool: current 3), which no sequence of events makes.
  MemoryStats live = statistics_.report();
  live.allocation[small].peak = 0;
  EXPECT_EQ(
      broken_invariant_of([&] { detail::AllocatorStatistics::check_figures(live, expected()); }),
      "statistics");
  live.allocation[small].peak = 3;
  EXPECT_EQ(
      broken_invariant_of([&] { detail::AllocatorStatistics::check_figures(live, expected()); }),
      "");
  // Active is derived from allocation and the waiting blocks: a waiting block no block has.
  statistics_.start_waiting(true, 4096);
  EXPECT_EQ(broken(), "statistics");
}

TEST_F(BrokenStore, ABlockThatNoLongerTilesItsSegment) {
  b_->size += 512;  // overlaps c
  EXPECT_EQ(broken(), "tiling");
  b_->size -= 512;
  b_->next = nullptr;  // the segment ends early
  EXPECT_EQ(broken(), "tiling");
  b_->next = c_;
  c_->prev = a_;  // links that disagree
  EXPECT_EQ(broken(), "tiling");
  c_->prev = b_;
  EXPECT_EQ(broken(), "");
}

TEST_F(BrokenStore, ACachedBlockMissingFromTheFreeBins) {
  free_b_into_bins();
  ASSERT_TRUE(b_->cached);
  pools_.small.remove(b_);  // gone from the bins ...
  b_->cached = true;        // ... but still marked cached
  EXPECT_EQ(broken(), "free-bins");
  b_->cached = false;
  pools_.small.insert(b_);
  EXPECT_EQ(broken(), "");
}

TEST_F(BrokenStore, ARecentBlockTheFrontCacheLost) {
  free_b_into_front_cache();
  ASSERT_TRUE(b_->recent);
  ASSERT_EQ(pools_.recent.count, 1U);
  EXPECT_EQ(broken(), "");
  pools_.recent.count = 0;  // the list forgets it
  EXPECT_EQ(broken(), "recent");
  pools_.recent.count = 1;
  b_->recent = false;  // the block forgets it
  EXPECT_EQ(broken(), "block-state");
  b_->recent = true;
  EXPECT_EQ(broken(), "");
  front_cache_.bypass(true);  // at capacity every free goes to the bins: none may be recent
  EXPECT_EQ(broken(), "recent");
  front_cache_.bypass(false);
  EXPECT_EQ(broken(), "");
}

TEST_F(BrokenStore, AnAllocatedBlockInTheFreeBins) {
  pools_.small.insert(b_);  // sets cached: allocated and cached at once
  EXPECT_EQ(broken(), "block-state");
  pools_.small.remove(b_);  // unlinks it and clears cached
  EXPECT_EQ(broken(), "");
}

TEST_F(BrokenStore, APointerMapThatLostABlock) {
  ASSERT_EQ(store_.live().erase(b_->address), b_);
  EXPECT_EQ(broken(), "pointer-map");
  store_.live().insert(b_->address, b_);
  store_.live().insert(b_->address + 1 * MiB, b_);  // an entry for no allocated block
  EXPECT_EQ(broken(), "pointer-map");
  (void)store_.live().erase(b_->address + 1 * MiB);
  EXPECT_EQ(broken(), "");
}

TEST_F(BrokenStore, AStreamThatMiscountsItsSegments) {
  ++pools_.segments;
  EXPECT_EQ(broken(), "stream-pools");
  --pools_.segments;
  EXPECT_EQ(broken(), "");
}

// The hot path tests one word for everything that sends a call the whole way (hooks, waiting
// blocks, settings); a word that says "nothing" while something is there would skip it.
// Costs milliseconds.
TEST(HotPathGate, AGateThatForgotWhatItGuards) {
  auto device = std::make_shared<SimulatedBackend>(8 * GiB);
  AllocatorCore core(*device, AllocatorConfig{});
  void* p = core.allocate(4096, kDefaultStream);
  const auto gate_invariant = [](unsigned gate, unsigned derived) {
    return broken_invariant_of([&] { detail::HotPathGate::check(gate, derived); });
  };
  EXPECT_EQ(core.off_hot_path(), 0U);  // nothing waits, no hooks, default settings
  EXPECT_EQ(core.off_hot_path_now(), 0U);
  EXPECT_EQ(broken_invariant(core), "");
  EXPECT_EQ(gate_invariant(4, core.off_hot_path_now()), "hot-path-gate");  // says blocks wait
  {
    PeakScope::Windows::Window window;
    core.open_window(window);  // a hook: the gate says so
    EXPECT_NE(core.off_hot_path(), 0U);
    EXPECT_EQ(broken_invariant(core), "");
    EXPECT_EQ(gate_invariant(0, core.off_hot_path_now()), "hot-path-gate");
    core.close_window(window);
  }
  EXPECT_EQ(core.off_hot_path(), 0U);
  EXPECT_EQ(broken_invariant(core), "");
  EXPECT_TRUE(core.deallocate(p));
}

// The free's hot path files a block by its segment's room: it must say what the bins hold.
// Costs milliseconds.
TEST(Validate, FrontCacheRoomsFollowTheBinsOfExpandableSegments) {
  auto device = std::make_shared<SimulatedBackend>(8 * GiB);
  AllocatorConfig config;
  config.expandable_segments = true;
  AllocatorCore core(*device, config);
  void* a = core.allocate(4096, kDefaultStream);
  void* b = core.allocate(4096, kDefaultStream);
  const detail::Block* block = core.find(b);
  ASSERT_NE(block, nullptr);
  const detail::Segment* segment = block->segment;
  // The page's rest after b is the bins' only block: b's free keeps placement, a's would not.
  ASSERT_EQ(segment->bins->count(), 1U);
  EXPECT_EQ(segment->room.limit, 0U);
  EXPECT_EQ(segment->room.next, reinterpret_cast<std::uintptr_t>(block->next));
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

// FrontCache's "front-cache" checker on pools built by hand: a growing expandable segment
// whose room is not what its (empty) bins keep, and another expandable segment whose room is
// open. Costs microseconds.
TEST(Validate, AFrontCacheRoomThatDisagreesWithItsBinsIsNamed) {
  detail::StreamPools pools;
  detail::Segment growing;
  growing.expandable = true;
  growing.small_pool = true;
  growing.bins = &pools.small;
  pools.expandable_small = &growing;
  pools.small.keep_room(&growing.room);
  const auto room_invariant = [&](const detail::Segment& s) {
    return broken_invariant_of([&] {
      detail::FrontCache::check_room(s, &pools);
      detail::FrontCache::check_rooms(kDefaultStream, pools);
    });
  };
  EXPECT_EQ(room_invariant(growing), "");
  const std::size_t kept = growing.room.limit;  // the bins are empty: room for one
  growing.room.limit = kept == 0 ? 1 : 0;
  EXPECT_EQ(room_invariant(growing), "front-cache");
  growing.room.limit = kept;
  EXPECT_EQ(room_invariant(growing), "");
  detail::Segment other;  // expandable, not growing: closed
  other.expandable = true;
  other.room = detail::kClosedRoom;
  EXPECT_EQ(room_invariant(other), "");
  other.room = detail::FrontCacheRoom{};  // open, as only a fixed segment's may be
  EXPECT_EQ(room_invariant(other), "front-cache");
  pools.small.keep_room(nullptr);
}

// Per-stream state: a stream with no segments costs nothing after empty_cache(), however many
// streams came and went (each used to keep about 38 KiB, and finding a stream was a linear
// scan: 20,000 streams took seconds and 770 MiB).
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

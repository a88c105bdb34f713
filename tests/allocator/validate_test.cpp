// CachingAllocator::validate(): it passes through a scripted scenario that visits every kind of
// state (splits, merges, pending frees, oversize blocks, empty_cache), and it catches each kind
// of corruption, named, when a test breaks the core's bookkeeping on purpose.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "allocator/allocator_core.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/errors.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {

// Reaches into AllocatorCore (a friend) to break one invariant at a time.
class AllocatorCoreTestAccess {
 public:
  static MemoryStats& stats(AllocatorCore& core) { return core.stats_; }
  static detail::PointerMap& live(AllocatorCore& core) { return core.live_; }
  static detail::Block* block(AllocatorCore& core, const void* ptr) {
    return core.live_.find(reinterpret_cast<std::uintptr_t>(ptr));
  }
};

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

  void* allocate(std::size_t bytes) {
    OutOfMemoryError::Figures oom;
    return core_.allocate(bytes, kDefaultStream, oom);
  }

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
  Access::stats(core_).active[1].peak = 0;  // small pool: current 3, above its peak
  EXPECT_EQ(broken_invariant(core_), "statistics");
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

// Page recycling (expandable_segments_recycling), on the simulated device: never moves no page
// (only empty_cache() and the out-of-memory flush unmap), always and above_peak move free whole
// pages instead of mapping new ones, and the pages they may take include the part of a cached
// block that the growing run does not need.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "expandable_checks.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

constexpr auto kAll = static_cast<std::size_t>(StatPool::all);

AllocatorConfig with_policy(const std::string& policy) {
  return AllocatorConfig::parse("expandable_segments:true,expandable_segments_recycling:" + policy);
}

// Seeded allocations and frees on three streams, no empty_cache(), on a device too big to fill.
MemoryStats run_without_empty_cache(const std::string& policy) {
  auto device = std::make_shared<SimulatedBackend>(1024 * GiB);
  CachingAllocator allocator(device, with_policy(policy));
  std::mt19937_64 rng(77);
  const auto uniform = [&rng](std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
  };
  std::vector<void*> live;
  for (int step = 0; step < 3'000; ++step) {
    if (live.empty() || (live.size() < 48 && uniform(0, 1) == 0)) {
      live.push_back(allocator.allocate(uniform(1, 256 * MiB), uniform(0, 2)));
    } else {
      const std::size_t i = uniform(0, live.size() - 1);
      allocator.deallocate(live[i]);
      live[i] = live.back();
      live.pop_back();
    }
  }
  EXPECT_TRUE(testing::expandable_consistent(allocator));
  const MemoryStats s = allocator.stats();
  for (void* p : live) allocator.deallocate(p);
  return s;
}

TEST(ExpandableRecycling, NeverUnmapsNothingWithoutEmptyCacheOrOutOfMemory) {
  const MemoryStats s = run_without_empty_cache("never");
  EXPECT_EQ(s.num_device_free, 0) << "pages were moved or unmapped under recycling:never";
  EXPECT_EQ(s.num_alloc_retries, 0);
}

TEST(ExpandableRecycling, AlwaysMovesPagesAndReservesNoMoreThanNever) {
  const MemoryStats never = run_without_empty_cache("never");
  const MemoryStats always = run_without_empty_cache("always");
  EXPECT_GT(always.num_device_free, 0) << "no page was ever moved";
  EXPECT_EQ(always.num_alloc_retries, 0);
  EXPECT_LT(always.reserved_bytes[kAll].peak, never.reserved_bytes[kAll].peak);
  RecordProperty("peak_reserved_mib_never",
                 static_cast<int>(never.reserved_bytes[kAll].peak >> 20));
  RecordProperty("peak_reserved_mib_always",
                 static_cast<int>(always.reserved_bytes[kAll].peak >> 20));
}

// Two free runs around an unmapped gap, [0, 114) and [192, 376) MiB, and a 255 MiB request: the
// lowest run that fits is [0, 255), which lacks the gap's 78 MiB. The second block's top 121 MiB
// are free whole pages the request does not need: moving 78 MiB of them into the gap keeps
// reserved at 298 MiB; mapping new pages makes it 376 MiB with 121 MiB idle.
// Regression: recycling skipped every cached block touching the growing run, and mapped new
// pages here; now it takes the part of the run's last block past what the request needs.
TEST(ExpandableRecycling, TakesTheFreePagesOfABlockTouchingTheGrowingRunBeyondWhatTheRunNeeds) {
  for (const char* policy : {"always", "above_peak"}) {
    SCOPED_TRACE(policy);
    auto device = std::make_shared<SimulatedBackend>(64 * GiB);
    CachingAllocator allocator(device, with_policy(policy));
    void* a = allocator.allocate(114 * MiB);
    void* b = allocator.allocate(78 * MiB);
    void* c = allocator.allocate(184 * MiB);
    allocator.deallocate(b);
    ASSERT_EQ(allocator.empty_cache(), 78 * MiB);
    allocator.deallocate(a);
    allocator.deallocate(c);
    ASSERT_EQ(allocator.stats().reserved_bytes[kAll].current, static_cast<std::int64_t>(298 * MiB));
    void* d = allocator.allocate(255 * MiB);
    EXPECT_EQ(d, a) << "the lowest address that fits";
    EXPECT_EQ(allocator.stats().reserved_bytes[kAll].current, static_cast<std::int64_t>(298 * MiB))
        << "new pages were mapped while 121 MiB of free whole pages stayed mapped";
    EXPECT_TRUE(testing::expandable_consistent(allocator));
    allocator.deallocate(d);
  }
}

}  // namespace
}  // namespace memscope

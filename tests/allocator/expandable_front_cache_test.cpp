// Expandable segments and the front cache (issue 25): a block freed and allocated again at
// once takes the hot path, where keeping it unmerged leaves placement what merging it at the
// free would give (AllocatorCore::keeps_placement); everywhere else it is merged at the free.
#include <gtest/gtest.h>

#include <cstdint>
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

class ExpandableFrontCache : public ::testing::TestWithParam<const char*> {
 protected:
  [[nodiscard]] AllocatorConfig config() const {
    return AllocatorConfig::parse(std::string("expandable_segments:true,") +
                                  "expandable_segments_recycling:" + GetParam());
  }
};

TEST_P(ExpandableFrontCache, AFreeAndAnAllocationOfOneSizeReuseTheBlockWithoutMergeAndSplit) {
  // The block and the free rest of its page: merged at each free and split at each allocation,
  // inactive_split would count a split block per pair; the front cache hands the block back
  // as it is.
  for (const std::size_t size : {4 * KiB, 16 * MiB}) {
    auto device = std::make_shared<SimulatedBackend>(4 * GiB);
    CachingAllocator allocator(device, config());
    void* p = allocator.allocate(size);
    const std::int64_t splits = allocator.stats().inactive_split[kAll].allocated;
    for (int i = 0; i < 100; ++i) {
      allocator.deallocate(p);
      void* q = allocator.allocate(size);
      ASSERT_EQ(q, p) << size;
      p = q;
    }
    EXPECT_EQ(allocator.stats().inactive_split[kAll].allocated, splits) << size;
    allocator.validate();
    allocator.deallocate(p);
    allocator.validate();
  }
}

TEST_P(ExpandableFrontCache, ABlockWithAFreeBlockBelowIsMergedSoTheAllocationGoesLower) {
  auto device = std::make_shared<SimulatedBackend>(4 * GiB);
  CachingAllocator allocator(device, config());
  void* a = allocator.allocate(8 * MiB);
  void* b = allocator.allocate(8 * MiB);
  void* c = allocator.allocate(8 * MiB);  // keeps b from being a tail
  allocator.deallocate(a);
  allocator.deallocate(b);
  EXPECT_EQ(allocator.allocate(8 * MiB), a) << "best fit on a+b merged starts at a";
  allocator.validate();
  (void)c;
}

// A freed block stays out of the front cache while the bins hold a block of its size at a
// lower address: the front cache would hand back the freed one, best fit the lower one.
TEST_P(ExpandableFrontCache, ABlockWithOneOfItsSizeCachedBelowGoesToTheBins) {
  CachingAllocator allocator(std::make_shared<SimulatedBackend>(4 * GiB), config());
  void* a = allocator.allocate(8 * KiB);
  void* g1 = allocator.allocate(4 * KiB);
  void* b = allocator.allocate(8 * KiB);
  void* g2 = allocator.allocate(4 * KiB);
  allocator.deallocate(a);
  void* big = allocator.allocate(4 * MiB);  // a miss: a goes into the bins
  allocator.deallocate(b);
  void* p = allocator.allocate(8 * KiB);
  EXPECT_EQ(p, a);
  EXPECT_TRUE(testing::expandable_consistent(allocator));
  for (void* r : {p, g1, g2, big}) allocator.deallocate(r);
}

TEST_P(ExpandableFrontCache, RandomSequencesKeepEveryInvariant) {
  // Sizes from a few, so that frees and allocations of one size meet (the front cache's case),
  // with a second stream; validate() after every step.
  auto device = std::make_shared<SimulatedBackend>(16 * GiB);
  CachingAllocator allocator(device, config());
  std::mt19937_64 rng(25);
  const std::vector<std::size_t> sizes = {512, 4 * KiB, 1 * MiB, 3 * MiB, 16 * MiB, 40 * MiB};
  struct Live {
    void* p;
    std::size_t size;
  };
  std::vector<Live> live;
  for (int step = 0; step < 3000; ++step) {
    const bool allocate = live.empty() || rng() % 100 < 52;
    if (allocate) {
      const std::size_t size = sizes[rng() % sizes.size()];
      const StreamId stream = rng() % 8 == 0 ? 1 : 0;
      void* p = allocator.allocate(size, stream);
      live.push_back({p, size});
    } else {
      const std::size_t i = rng() % live.size();
      allocator.deallocate(live[i].p);
      live[i] = live.back();
      live.pop_back();
    }
    if (rng() % 200 == 0) allocator.empty_cache();
    ASSERT_NO_THROW(allocator.validate()) << "step " << step;
  }
  for (const Live& l : live) allocator.deallocate(l.p);
  EXPECT_TRUE(testing::expandable_consistent(allocator));
}

INSTANTIATE_TEST_SUITE_P(Recycling, ExpandableFrontCache, ::memscope::testing::kRecyclingPolicies,
                         ::memscope::testing::policy_name);

}  // namespace
}  // namespace memscope

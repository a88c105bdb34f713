// Many streams (issue 29.5), functional at a CI size: the slow path now flushes only its own
// stream's front cache, so other streams' recent blocks stay where they are until something
// needs every stream (stats, empty_cache, garbage collection). Everything must still add up.
// The speed goal lives in bench/many_streams.cpp.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "allocator_invariants.hpp"
#include "expandable_checks.hpp"
#include "memscope/backend.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/forwarding_backend.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"
#include "sanitizers.hpp"

namespace memscope {
namespace {

class ManyStreams : public ::testing::TestWithParam<const char*> {};

TEST_P(ManyStreams, EachStreamKeepsItsCacheAndEverythingAddsUp) {
  CachingAllocator allocator(make_backend("sim:1024GiB"), AllocatorConfig::parse(GetParam()));
  constexpr StreamId kStreams = 2000;
  for (StreamId s = 1; s <= kStreams; ++s) {
    void* small = allocator.allocate(4096, s);
    void* large = allocator.allocate(3 * MiB, s);
    allocator.deallocate(small);
    allocator.deallocate(large);
  }
  const std::int64_t reserved = allocator.stats().reserved_bytes[0].current;
  // Each stream gets its own cached block back (no new memory), whatever the order.
  std::vector<void*> again(kStreams + 1);
  for (StreamId s = kStreams; s >= 1; --s) again[s] = allocator.allocate(4096, s);
  EXPECT_EQ(allocator.stats().reserved_bytes[0].current, reserved);
  for (StreamId s = 1; s <= kStreams; ++s) {
    EXPECT_EQ(allocator.lookup(again[s]).stream, s);
  }
  EXPECT_TRUE(testing::allocator_consistent(allocator));
  for (StreamId s = 1; s <= kStreams; ++s) allocator.deallocate(again[s]);
  EXPECT_EQ(allocator.stats().allocated_bytes[0].current, 0);
  EXPECT_GT(allocator.empty_cache(), 0U);
  EXPECT_EQ(allocator.stats().reserved_bytes[0].current, 0);
  EXPECT_TRUE(testing::allocator_consistent(allocator));
}

TEST_P(ManyStreams, CurrentBytesAgreeWithStatsAfterRandomSteps) {
  // current_bytes() reads the counters without merging the streams' front caches (a replay's
  // series polls it after every event); it must say what stats() says, whatever the caches hold.
  // stats() merges them, so it is asked only every few steps, letting the caches fill between.
  CachingAllocator allocator(make_backend("sim:64GiB"), AllocatorConfig::parse(GetParam()));
  std::mt19937_64 rng(295);
  std::vector<void*> live;
  for (int step = 0; step < 6000; ++step) {
    const auto roll = rng() % 100;
    if (roll < 52 || live.empty()) {
      const std::size_t size = (rng() % 4 == 0) ? 1 + rng() % (24 * MiB) : 1 + rng() % 65536;
      live.push_back(allocator.allocate(size, static_cast<StreamId>(rng() % 300)));
    } else if (roll < 99) {
      const std::size_t i = rng() % live.size();
      allocator.deallocate(live[i]);
      live[i] = live.back();
      live.pop_back();
    } else {
      allocator.empty_cache();
    }
    const CachingAllocator::CurrentBytes now = allocator.current_bytes();
    if (step % 7 == 0) {
      const MemoryStats stats = allocator.stats();
      ASSERT_EQ(now.reserved, stats.reserved_bytes[0].current) << "step " << step;
      ASSERT_EQ(now.allocated, stats.allocated_bytes[0].current) << "step " << step;
      ASSERT_EQ(now.requested, stats.requested_bytes[0].current) << "step " << step;
    }
  }
  for (void* p : live) allocator.deallocate(p);
  EXPECT_EQ(allocator.current_bytes().allocated, 0);
  EXPECT_EQ(allocator.current_bytes().requested, 0);
  EXPECT_TRUE(testing::allocator_consistent(allocator));
}

TEST(ManyStreamsMemory, EachStreamCostsWhatItCaches) {
  // Each stream that cached a small segment kept 4,096 list heads (32 KiB) and the large pool's
  // 704 size classes until empty_cache(): 20,000 streams, 760 MiB of RSS with nothing
  // allocated (issue 29.5). Bins now hold their blocks in a list until they have more than a
  // few: 20,000 streams, two segments and four blocks each, take about 20 MiB (the kernel's
  // figure; the bound leaves room for AddressSanitizer's allocator). ThreadSanitizer's shadow
  // memory is counted in RSS: it grew 110 MiB in CI's TSan build, so that build skips.
  if (testing::kThreadSanitizer) GTEST_SKIP() << testing::kRssUnderTsan;
  CachingAllocator allocator(make_backend("sim:1024GiB"), AllocatorConfig{});
  const std::int64_t rss_before = testing::proc_status_bytes("VmRSS");
  ASSERT_GT(rss_before, 0);
  constexpr StreamId kStreams = 20'000;
  for (StreamId s = 1; s <= kStreams; ++s) {
    void* small = allocator.allocate(4096, s);
    void* large = allocator.allocate(3 * MiB, s);
    allocator.deallocate(small);
    allocator.deallocate(large);
  }
  const std::int64_t grown = testing::proc_status_bytes("VmRSS") - rss_before;
  EXPECT_EQ(allocator.stats().segment[0].current, 2 * static_cast<std::int64_t>(kStreams));
  EXPECT_LT(grown, static_cast<std::int64_t>(100 * MiB))
      << "20,000 streams with a cached segment or two grew RSS by " << grown / 1024 << " KiB";
  EXPECT_TRUE(testing::allocator_consistent(allocator));
}

TEST(ManyStreamsExpandable, TwentyThousandStreamsFindAddressSpace) {
  // Each stream's first range once took the whole limit: 8,192 streams of a 4 TiB simulated
  // device used up its 2^56 bytes of address space, and the next allocation failed with the
  // device all free (issue 29.5). Ranges past the first few now share the limit out. Also under
  // above_peak, which takes other streams' cached pages past the high-water mark (each free here
  // waits in its stream's front cache, so every stream keeps its ranges).
  for (const char* policy : {"at_limit", "above_peak"}) {
    SCOPED_TRACE(policy);
    CachingAllocator allocator(
        make_backend("sim:4TiB"),
        AllocatorConfig::parse(
            std::string("expandable_segments:true,expandable_segments_recycling:") + policy));
    constexpr StreamId kStreams = 20'000;
    for (StreamId s = 1; s <= kStreams; ++s) {
      void* small = allocator.allocate(4096, s);
      void* large = allocator.allocate(3 * MiB, s);
      ASSERT_NE(small, nullptr);
      ASSERT_NE(large, nullptr);
      allocator.deallocate(small);
      allocator.deallocate(large);
    }
    const MemoryStats stats = allocator.stats();
    EXPECT_EQ(stats.num_ooms, 0);
    EXPECT_EQ(stats.segment[0].current, 2 * static_cast<std::int64_t>(kStreams));
    // A stream past the first few still grows its range well beyond one request.
    std::vector<void*> grown;
    for (int i = 0; i < 64; ++i) grown.push_back(allocator.allocate(3 * MiB, kStreams));
    EXPECT_TRUE(testing::allocator_consistent(allocator));
    for (void* p : grown) allocator.deallocate(p);
    EXPECT_GT(allocator.empty_cache(), 0U);
    EXPECT_EQ(allocator.stats().reserved_bytes[0].current, 0);
  }
}

TEST(ManyStreamsExpandable, EmptyCacheEveryStepNeverRunsOutOfAddressSpace) {
  // empty_cache() after every step gives each range back, and the next step reserves a new
  // one, of the whole limit (4 TiB). The simulated device never reused a released range, so
  // after about 16,000 steps a reservation failed with the device empty (OutOfMemoryError).
  CachingAllocator allocator(make_backend("sim:4TiB"),
                             AllocatorConfig::parse("expandable_segments:true"));
  for (int step = 0; step < 20'000; ++step) {
    void* p = allocator.allocate(3 * MiB);
    ASSERT_NE(p, nullptr);
    allocator.deallocate(p);
    ASSERT_GT(allocator.empty_cache(), 0U) << step;
  }
  EXPECT_EQ(allocator.stats().num_ooms, 0);
  EXPECT_EQ(allocator.stats().reserved_bytes[0].current, 0);
}

// A simulated device that counts the address ranges held (expandable segments reserve one per
// stream and pool).
class RangeCountingDevice final : public ForwardingBackend {
 public:
  explicit RangeCountingDevice(std::size_t capacity)
      : ForwardingBackend(std::make_shared<SimulatedBackend>(capacity)) {}
  std::size_t ranges = 0;
  [[nodiscard]] void* reserve_address_range(std::size_t bytes) override {
    void* base = ForwardingBackend::reserve_address_range(bytes);
    if (base != nullptr) ++ranges;
    return base;
  }
  void release_address_range(void* base, std::size_t bytes) noexcept override {
    ForwardingBackend::release_address_range(base, bytes);
    --ranges;
  }
};

TEST(ManyStreamsExpandable, RecyclingAtTheLimitGivesEmptiedRangesBack) {
  // At the memory limit a stream's growth takes other streams' free pages. A range left with no
  // page mapped was kept, and its stream's pools with it, so every later growth walked every
  // stream used so far: 20,000 streams at a 64 MiB limit took 26 s (issue 29.5;
  // memscope_many_streams --at-limit). Such a range now goes back at once.
  auto device = std::make_shared<RangeCountingDevice>(64 * MiB);
  CachingAllocator allocator(device, AllocatorConfig::parse("expandable_segments:true"));
  constexpr StreamId kStreams = 2000;
  for (StreamId s = 1; s <= kStreams; ++s) {
    allocator.deallocate(allocator.allocate(4096, s));
    allocator.deallocate(allocator.allocate(3 * MiB, s));
    // 64 MiB holds pages of about 10 streams (2 MiB small, 4 MiB large): 21 ranges hold pages
    // at any time here; without giving emptied ones back, every stream kept its two.
    ASSERT_LE(device->ranges, 32U) << "after stream " << s;
  }
  EXPECT_EQ(allocator.stats().num_ooms, 0);
  EXPECT_TRUE(testing::allocator_consistent(allocator));
  (void)allocator.empty_cache();
  EXPECT_EQ(device->ranges, 0U);
}

INSTANTIATE_TEST_SUITE_P(Configs, ManyStreams,
                         ::testing::Values("", "expandable_segments:true",
                                           "expandable_segments:true,"
                                           "expandable_segments_recycling:above_peak",
                                           "garbage_collection_threshold:0.5"),
                         [](const auto& info) {
                           const std::string config = info.param;
                           if (config.empty()) return std::string("default");
                           if (config.ends_with("above_peak")) return std::string("above_peak");
                           return config.substr(0, config.find('_'));
                         });

}  // namespace
}  // namespace memscope

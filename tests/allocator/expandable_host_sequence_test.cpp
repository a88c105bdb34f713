// Expandable segments on real host memory: a seeded random sequence of allocations, frees,
// record_streams and empty_caches over three streams, under each page-recycling policy. After
// every step the expandable invariants hold (expandable_checks.hpp); every live block keeps the
// bytes written into it (one per page, so a page that recycling moved, unmapped or mapped twice
// shows); at each empty_cache() the process's resident bytes (the kernel's page-table walk,
// smaps_rollup) fall by what empty_cache() reports, and throughout they follow reserved bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "expandable_checks.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/host_backend.hpp"
#include "memscope/units.hpp"
#include "sanitizers.hpp"

namespace memscope {
namespace {

constexpr std::size_t kStride = 4096;  // one byte written per (OS) page of each block
constexpr std::int64_t kRssTolerance = 1 * MiB;
// The test's own bookkeeping (maps, snapshots) grows the heap a little over the run.
constexpr std::int64_t kRssDrift = 4 * MiB;

struct Live {
  std::size_t size;
  unsigned char tag;
};

unsigned char expected_byte(unsigned char tag, std::size_t offset) {
  return static_cast<unsigned char>(tag + offset / kStride);
}

void write_pattern(void* p, std::size_t size, unsigned char tag) {
  auto* bytes = static_cast<unsigned char*>(p);
  for (std::size_t i = 0; i < size; i += kStride) bytes[i] = expected_byte(tag, i);
  bytes[size - 1] = expected_byte(tag, size - 1);
}

bool pattern_intact(const void* p, std::size_t size, unsigned char tag) {
  const auto* bytes = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < size; i += kStride) {
    if (bytes[i] != expected_byte(tag, i)) return false;
  }
  return bytes[size - 1] == expected_byte(tag, size - 1);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

class ExpandableHostSequence : public ::testing::TestWithParam<const char*> {};

TEST_P(ExpandableHostSequence, EveryStepKeepsInvariantsContentsAndRssInStep) {
  const bool exact_rss = !testing::kThreadSanitizer;
  // Under AddressSanitizer the heap's quarantine keeps freed bookkeeping resident (up to
  // 256 MiB), so resident bytes follow reserved bytes only around single calls.
  const bool rss_follows_reserved = exact_rss && !kAddressSanitizer;
  // A 1 GiB limit keeps the test's resident memory modest on a shared machine.
  CachingAllocator allocator(
      std::make_shared<HostBackend>(),
      AllocatorConfig::parse(std::string("memory_limit:1GiB,expandable_segments:true,"
                                         "expandable_segments_recycling:") +
                             GetParam()));
  std::mt19937_64 rng(20261203);
  const auto uniform = [&rng](std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
  };
  std::map<void*, Live> live;
  std::size_t live_bytes = 0;
  int empty_caches = 0;
  const std::int64_t rss_start = testing::resident_bytes();
  for (int step = 0; step < 6'000; ++step) {
    const std::size_t op = uniform(0, 999);
    if (op < 480 && live.size() < 48) {
      // Log-uniform from 1 B to 64 MiB.
      const double exponent = std::uniform_real_distribution<double>(0.0, 26.0)(rng);
      const auto size = std::max<std::size_t>(1, static_cast<std::size_t>(std::exp2(exponent)));
      if (live_bytes + size > 640 * MiB) continue;
      const StreamId stream = uniform(0, 2);
      void* p = nullptr;
      try {
        p = allocator.allocate(size, stream);
      } catch (const OutOfMemoryError&) {
        continue;  // fragmentation under the 1 GiB limit; the allocator must stay usable
      }
      const auto tag = static_cast<unsigned char>(step);
      write_pattern(p, size, tag);
      live.emplace(p, Live{size, tag});
      live_bytes += size;
    } else if (op < 950 && !live.empty()) {
      auto it = live.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(uniform(0, live.size() - 1)));
      if (uniform(0, 4) == 0) allocator.record_stream(it->first, uniform(0, 2));
      live_bytes -= it->second.size;
      allocator.deallocate(it->first);
      live.erase(it);
    } else if (op >= 950) {
      const std::int64_t rss_before = testing::resident_bytes();
      const std::int64_t reserved_before = allocator.stats().reserved_bytes[0].current;
      const std::size_t released = allocator.empty_cache();
      const std::int64_t rss_after = testing::resident_bytes();
      ++empty_caches;
      EXPECT_EQ(reserved_before - allocator.stats().reserved_bytes[0].current,
                static_cast<std::int64_t>(released))
          << "step " << step;
      if (exact_rss) {
        EXPECT_NEAR(static_cast<double>(rss_before - rss_after), static_cast<double>(released),
                    kRssTolerance)
            << "step " << step << ": empty_cache() released " << released << " bytes";
      }
    }
    ASSERT_TRUE(testing::expandable_consistent(allocator)) << "step " << step;
    // Every live block still holds what was written into it (checked every 16th step and
    // whenever the mapping may have changed a lot, to keep the test fast).
    if (step % 16 == 0 || op >= 950) {
      for (const auto& [p, l] : live) {
        ASSERT_TRUE(pattern_intact(p, l.size, l.tag))
            << "step " << step << ": a live block of " << l.size << " bytes lost its contents";
      }
    }
    ASSERT_EQ(allocator.stats().allocation[0].current, static_cast<std::int64_t>(live.size()));
    // Reserved bytes are resident bytes, through maps, moves and unmaps: the process's RSS
    // moves with them (a moved page that stayed behind, or was copied, would show here).
    if (rss_follows_reserved && step % 16 == 0) {
      const std::int64_t reserved = allocator.stats().reserved_bytes[0].current;
      EXPECT_NEAR(static_cast<double>(testing::resident_bytes() - rss_start),
                  static_cast<double>(reserved), static_cast<double>(kRssDrift))
          << "step " << step << ": " << reserved << " bytes reserved";
    }
  }
  EXPECT_GT(empty_caches, 100);
  for (const auto& [p, l] : live) {
    EXPECT_TRUE(pattern_intact(p, l.size, l.tag));
    allocator.deallocate(p);
  }
  (void)allocator.empty_cache();
  EXPECT_EQ(allocator.stats().reserved_bytes[0].current, 0);
  EXPECT_TRUE(allocator.snapshot().segments.empty());
}

INSTANTIATE_TEST_SUITE_P(Recycling, ExpandableHostSequence, ::memscope::testing::kRecyclingPolicies,
                         ::memscope::testing::policy_name);

}  // namespace
}  // namespace memscope

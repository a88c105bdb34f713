// poison_freed with expandable segments (AddressSanitizer builds; skipped elsewhere): a freed
// block is poisoned while cached, and a block handed out is usable to its last byte, also when
// its pages were mapped fresh, moved from another stream's range by recycling, or mapped again
// after empty_cache() unmapped them.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "expandable_checks.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/host_backend.hpp"
#include "memscope/units.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define MEMSCOPE_EXPANDABLE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MEMSCOPE_EXPANDABLE_ASAN 1
#endif
#endif
#ifdef MEMSCOPE_EXPANDABLE_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace memscope {
namespace {

// The first poisoned byte of [p, p + size), or nullptr; always nullptr without ASan.
const void* first_poisoned(const void* p, std::size_t size) {
#ifdef MEMSCOPE_EXPANDABLE_ASAN
  return __asan_region_is_poisoned(const_cast<void*>(p), size);
#else
  (void)p;
  (void)size;
  return nullptr;
#endif
}

class ExpandablePoison : public ::testing::TestWithParam<const char*> {};

TEST_P(ExpandablePoison, FreedBlocksArePoisonedAndHandedOutBlocksAreNot) {
#ifndef MEMSCOPE_EXPANDABLE_ASAN
  GTEST_SKIP() << "not built with AddressSanitizer: poison_freed has no effect here (the asan "
                  "preset runs it)";
#endif
  CachingAllocator allocator(
      std::make_shared<HostBackend>(),
      AllocatorConfig::parse(
          std::string("poison_freed:true,memory_limit:1GiB,"
                      "expandable_segments:true,expandable_segments_recycling:") +
          GetParam()));
  std::mt19937_64 rng(31);
  const auto uniform = [&rng](std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
  };
  std::vector<std::pair<void*, std::size_t>> live;
  for (int step = 0; step < 2'000; ++step) {
    const std::size_t op = uniform(0, 99);
    if (op < 50 && live.size() < 24) {
      const std::size_t size = uniform(0, 2) == 0 ? uniform(1, 1 * MiB) : uniform(1, 32 * MiB);
      void* p = nullptr;
      try {
        p = allocator.allocate(size, uniform(0, 2));
      } catch (const OutOfMemoryError&) {
        continue;
      }
      ASSERT_EQ(first_poisoned(p, size), nullptr)
          << "step " << step << ": a block of " << size << " bytes was handed out poisoned";
      std::memset(p, 0x42, size);
      live.emplace_back(p, size);
    } else if (op < 97 && !live.empty()) {
      const std::size_t i = uniform(0, live.size() - 1);
      allocator.deallocate(live[i].first);
      ASSERT_NE(first_poisoned(live[i].first, 1), nullptr)
          << "step " << step << ": a freed block is not poisoned";
      live[i] = live.back();
      live.pop_back();
    } else {
      (void)allocator.empty_cache();
    }
  }
  EXPECT_TRUE(testing::expandable_consistent(allocator));
  for (const auto& [p, size] : live) allocator.deallocate(p);
}

INSTANTIATE_TEST_SUITE_P(Recycling, ExpandablePoison, ::memscope::testing::kRecyclingPolicies,
                         ::memscope::testing::policy_name);

}  // namespace
}  // namespace memscope

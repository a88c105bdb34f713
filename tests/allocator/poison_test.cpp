// poison_freed: in AddressSanitizer builds, cached blocks of host memory are poisoned until
// they are handed out again, so a use after free aborts with "use-after-poison" instead of
// silently reading memory the cache keeps. Elsewhere the key is accepted and has no effect.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "memscope/backend.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/config.hpp"
#include "memscope/errors.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define MEMSCOPE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MEMSCOPE_TEST_ASAN 1
#endif
#endif
#ifdef MEMSCOPE_TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace memscope {
namespace {

constexpr const char* kNoAsan =
    "not built with AddressSanitizer: poison_freed has no effect here (the asan preset runs it)";

bool poisoned(const void* p) {
#ifdef MEMSCOPE_TEST_ASAN
  return __asan_address_is_poisoned(p) != 0;
#else
  (void)p;
  return false;
#endif
}

CachingAllocator poisoning_host_allocator() {
  return CachingAllocator(make_backend("host"), AllocatorConfig::parse("poison_freed:true"));
}

TEST(PoisonFreed, ConfigKey) {
  EXPECT_FALSE(AllocatorConfig{}.poison_freed);
  const AllocatorConfig on = AllocatorConfig::parse("poison_freed:true");
  EXPECT_TRUE(on.poison_freed);
  EXPECT_EQ(on.to_string(), "poison_freed:true");
  EXPECT_EQ(AllocatorConfig::parse(on.to_string()), on);
  EXPECT_FALSE(AllocatorConfig::parse("poison_freed:false").poison_freed);
  try {
    (void)AllocatorConfig::parse("poison_freed:yes");
    ADD_FAILURE() << "poison_freed:yes was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "poison_freed");
    EXPECT_NE(std::string(e.what()).find("true or false"), std::string::npos) << e.what();
  }
}

// Without ASan, and on backends whose memory the CPU does not own, the key changes nothing.
TEST(PoisonFreed, AllocatorWorksWithTheKeyOnAnyBackend) {
  CachingAllocator sim(std::make_shared<SimulatedBackend>(8 * GiB),
                       AllocatorConfig::parse("poison_freed:true"));
  void* p = sim.allocate(4096);
  sim.deallocate(p);
  EXPECT_EQ(sim.allocate(4096), p);  // sim addresses are never touched, poisoned or not
  sim.validate();

  CachingAllocator host(make_backend("host"), AllocatorConfig::parse("poison_freed:true"));
  auto* bytes = static_cast<unsigned char*>(host.allocate(4096));
  std::memset(bytes, 0xAB, 4096);
  host.deallocate(bytes);
  auto* again = static_cast<unsigned char*>(host.allocate(4096));
  ASSERT_EQ(again, bytes);
  std::memset(again, 0xCD, 4096);  // handed out again: usable (unpoisoned under ASan)
  host.deallocate(again);
  EXPECT_GT(host.empty_cache(), 0U);
}

TEST(PoisonFreed, CachedHostBlocksArePoisonedUntilHandedOutAgain) {
#ifndef MEMSCOPE_TEST_ASAN
  GTEST_SKIP() << kNoAsan;
#endif
  CachingAllocator allocator = poisoning_host_allocator();
  auto* a = static_cast<char*>(allocator.allocate(4096));
  auto* b = static_cast<char*>(allocator.allocate(4096));
  EXPECT_FALSE(poisoned(a));
  EXPECT_FALSE(poisoned(a + 4095));
  EXPECT_TRUE(poisoned(b + 4096)) << "the rest of the segment is cached: poisoned";
  allocator.deallocate(a);
  EXPECT_TRUE(poisoned(a));
  EXPECT_TRUE(poisoned(a + 4095));
  EXPECT_FALSE(poisoned(b)) << "its allocated neighbour is untouched";
  auto* again = static_cast<char*>(allocator.allocate(1000));  // a split of the cached block
  ASSERT_EQ(again, a);
  EXPECT_FALSE(poisoned(again + 999));
  EXPECT_TRUE(poisoned(a + 1024)) << "the split remainder stays cached";
  allocator.deallocate(again);
  allocator.deallocate(b);
  EXPECT_GT(allocator.empty_cache(), 0U);  // unpoisons the segment before unmapping it

  // Without the key nothing is poisoned.
  CachingAllocator plain(make_backend("host"), AllocatorConfig{});
  void* p = plain.allocate(4096);
  plain.deallocate(p);
  EXPECT_FALSE(poisoned(p));
}

TEST(PoisonFreedDeathTest, ReadingAFreedCachedHostBlockAborts) {
#ifndef MEMSCOPE_TEST_ASAN
  GTEST_SKIP() << kNoAsan;
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        CachingAllocator allocator = poisoning_host_allocator();
        auto* p = static_cast<volatile char*>(allocator.allocate(4096));
        p[0] = 1;
        allocator.deallocate(const_cast<char*>(p));
        (void)p[0];  // use after free: the block sits in the cache
      },
      "use-after-poison");
}

}  // namespace
}  // namespace memscope

// Many streams (issue 29.5), functional at a CI size: the slow path now flushes only its own
// stream's front cache, so other streams' recent blocks stay where they are until something
// needs every stream (stats, empty_cache, garbage collection). Everything must still add up.
// The speed goal lives in bench/many_streams.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "allocator_invariants.hpp"
#include "memscope/backend.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/units.hpp"

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

INSTANTIATE_TEST_SUITE_P(Configs, ManyStreams,
                         ::testing::Values("", "expandable_segments:true",
                                           "garbage_collection_threshold:0.5"),
                         [](const auto& info) {
                           const std::string config = info.param;
                           if (config.empty()) return std::string("default");
                           return config.substr(0, config.find('_'));
                         });

}  // namespace
}  // namespace memscope

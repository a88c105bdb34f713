// Address 0 on every query that takes an address (issue 29.2): the pointer map keeps 0 as its
// empty key and its find() promises a non-null value, so lookup(0) and record_stream(0, s)
// once read an empty slot's null block and crashed. On host, simulated and expandable memory.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "allocator_invariants.hpp"
#include "memscope/backend.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/errors.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

struct Setup {
  const char* backend;
  const char* config;
};

class NullAddress : public ::testing::TestWithParam<Setup> {};

TEST_P(NullAddress, IsNoAllocationAndNeverACrash) {
  CachingAllocator allocator(make_backend(GetParam().backend),
                             AllocatorConfig::parse(GetParam().config));
  // Both with an empty map and with allocations in it (home slot 0 may then be taken).
  std::vector<void*> live;
  for (int round = 0; round < 2; ++round) {
    const CachingAllocator::Allocation none = allocator.lookup(nullptr);
    EXPECT_EQ(none.size, 0U);
    EXPECT_EQ(none.requested_size, 0U);
    EXPECT_THROW(allocator.record_stream(nullptr, 7), InvalidPointerError);
    EXPECT_TRUE(allocator.try_deallocate(nullptr));
    allocator.deallocate(nullptr);
    for (std::size_t i = 1; i <= 100; ++i) live.push_back(allocator.allocate(512 * i));
  }
  EXPECT_EQ(allocator.stats().num_invalid_frees, 0);
  EXPECT_TRUE(testing::allocator_consistent(allocator));
  for (void* p : live) allocator.deallocate(p);
}

INSTANTIATE_TEST_SUITE_P(Backends, NullAddress,
                         ::testing::Values(Setup{"host", ""}, Setup{"sim:8GiB", ""},
                                           Setup{"host", "expandable_segments:true"},
                                           Setup{"sim:8GiB", "expandable_segments:true"}),
                         [](const auto& info) {
                           std::string name = info.param.backend;
                           name = name.substr(0, name.find(':'));
                           if (std::string(info.param.config).empty()) return name;
                           return name + "_expandable";
                         });

}  // namespace
}  // namespace memscope

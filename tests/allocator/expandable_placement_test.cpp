// Where a block goes inside the free run that placement by address space chose (expandable
// segments whose pages move: recycling above_peak and always). With 2 MiB pages, the partial
// pages at the ends of a free run stay mapped for nothing while its whole pages can move to
// where a growth needs them; so a block goes to the end of its run when that leaves the rest of
// the run more whole pages than its start would.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "expandable_checks.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

constexpr auto kAll = static_cast<std::size_t>(StatPool::all);

std::uintptr_t address(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

class ExpandablePlacement : public ::testing::TestWithParam<const char*> {
 protected:
  CachingAllocator allocator{
      std::make_shared<SimulatedBackend>(64 * GiB),
      AllocatorConfig::parse(std::string("expandable_segments:true,expandable_segments_page_size:"
                                         "2MiB,expandable_segments_recycling:") +
                             GetParam())};
};

// Pages of 2 MiB, offsets in MiB from the range's start: blocks [0, 1.5), [1.5, 5.5) and
// [5.5, 7), so 4 pages are mapped; the middle one is freed. A 1.5 MiB block at the start of that
// run, [1.5, 3), would leave [3, 5.5), no whole page; at its end, [4, 5.5), it leaves [1.5, 4),
// which holds the page [2, 4). Then a 3 MiB block at the open end, [7, 10), needs one page more
// than is mapped: that page moves there, and reserved stays at 8 MiB (10 with the block at the
// start of the run).
TEST_P(ExpandablePlacement, ABlockGoesToTheEndOfItsRunWhenThatLeavesAWholeFreePage) {
  void* first = allocator.allocate(3 * MiB / 2);
  void* middle = allocator.allocate(4 * MiB);
  void* last = allocator.allocate(3 * MiB / 2);
  const std::uintptr_t base = address(first);
  ASSERT_EQ(address(middle), base + 3 * MiB / 2);
  ASSERT_EQ(address(last), base + 11 * MiB / 2);
  ASSERT_EQ(allocator.stats().reserved_bytes[kAll].current, 8 * static_cast<std::int64_t>(MiB));
  allocator.deallocate(middle);

  void* placed = allocator.allocate(3 * MiB / 2);
  EXPECT_EQ(address(placed), base + 4 * MiB) << "not at the end of the freed run";
  EXPECT_TRUE(testing::expandable_consistent(allocator));

  void* grown = allocator.allocate(3 * MiB);
  EXPECT_EQ(address(grown), base + 7 * MiB);
  EXPECT_EQ(allocator.stats().reserved_bytes[kAll].current, 8 * static_cast<std::int64_t>(MiB))
      << "a new page was mapped while a whole free page was left in the run";
  EXPECT_TRUE(testing::expandable_consistent(allocator));

  // The front of the run stays a cached block that merges back when the block is freed.
  allocator.deallocate(placed);
  void* again = allocator.allocate(4 * MiB);
  EXPECT_EQ(address(again), base + 3 * MiB / 2);
  EXPECT_TRUE(testing::expandable_consistent(allocator));
  for (void* p : {first, last, grown, again}) allocator.deallocate(p);
  EXPECT_TRUE(testing::expandable_consistent(allocator));
}

// A run whose start leaves as many whole pages as its end keeps the block at its start
// (PyTorch's place): [1.5, 4.5) freed between [0, 1.5) and [4.5, 6); a 1.25 MiB block at either
// end leaves no whole page.
TEST_P(ExpandablePlacement, ABlockStaysAtTheStartOfItsRunWhenTheEndKeepsNoMorePages) {
  void* first = allocator.allocate(3 * MiB / 2);
  void* middle = allocator.allocate(3 * MiB);
  void* last = allocator.allocate(3 * MiB / 2);
  allocator.deallocate(middle);
  void* placed = allocator.allocate(5 * MiB / 4);
  EXPECT_EQ(address(placed), address(first) + 3 * MiB / 2);
  EXPECT_TRUE(testing::expandable_consistent(allocator));
  for (void* p : {first, last, placed}) allocator.deallocate(p);
}

INSTANTIATE_TEST_SUITE_P(MovingPages, ExpandablePlacement,
                         ::testing::Values("above_peak", "always"), testing::policy_name);

}  // namespace
}  // namespace memscope

// Page recycling across streams (expandable segments): under above_peak a growth past the
// high-water mark takes whole free pages of other streams' cached blocks for what its own
// stream's do not cover, instead of mapping new memory; and it finds them through the index of
// bins that hold a free page (PageDonors), never by walking every stream.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "allocator/allocator_core.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

constexpr auto kAll = static_cast<std::size_t>(StatPool::all);
constexpr StreamId kA = 1;
constexpr StreamId kB = 2;

AllocatorConfig above_peak() {
  return AllocatorConfig::parse(
      "expandable_segments:true,expandable_segments_recycling:above_peak");
}

// Mapped bytes by stream, from the snapshot (one segment per mapped range).
// The bins listed as holding a whole free page, of both pools.
std::size_t page_donors(const AllocatorCore& core) {
  return core.block_store().page_donors(true).count + core.block_store().page_donors(false).count;
}

std::map<StreamId, std::size_t> mapped_by_stream(const CachingAllocator& allocator) {
  std::map<StreamId, std::size_t> mapped;
  for (const SegmentInfo& s : allocator.snapshot().segments) mapped[s.stream] += s.total_size;
  return mapped;
}

TEST(ExpandablePageDonors, AStreamGrowingAboveThePeakTakesAnotherStreamsFreePages) {
  // Before, above_peak took only the growing stream's own pages below the limit: B mapped
  // 64 MiB more while A's 64 MiB of free whole pages stayed mapped (reserved 192 MiB).
  auto device = std::make_shared<SimulatedBackend>(64 * GiB);
  CachingAllocator allocator(device, above_peak());
  void* a = allocator.allocate(64 * MiB, kA);
  void* b = allocator.allocate(64 * MiB, kB);
  allocator.deallocate(a);
  const std::int64_t reserved = allocator.stats().reserved_bytes[kAll].current;  // merges a
  ASSERT_EQ(reserved, static_cast<std::int64_t>(128 * MiB));
  void* b2 = allocator.allocate(64 * MiB, kB);
  EXPECT_EQ(allocator.stats().reserved_bytes[kAll].current, reserved)
      << "stream B mapped new memory while stream A's free whole pages stayed mapped";
  EXPECT_EQ(allocator.stats().reserved_bytes[kAll].peak, reserved);
  EXPECT_EQ(allocator.lookup(b2).stream, kB);
  allocator.validate();
  allocator.deallocate(b);
  allocator.deallocate(b2);
  allocator.validate();
}

TEST(ExpandablePageDonors, TheGrowingStreamsOwnFreePagesGoFirst) {
  // B grows 64 MiB above the peak with 32 MiB of its own free pages (q1, below q2, too small
  // for the request) and A's 64 MiB: B's 32 MiB move first, then 32 of A's. B's range is
  // reserved first, below A's: taken highest address first across streams, all 64 would
  // have been A's.
  auto device = std::make_shared<SimulatedBackend>(64 * GiB);
  CachingAllocator allocator(device, above_peak());
  void* q1 = allocator.allocate(32 * MiB, kB);
  void* q2 = allocator.allocate(64 * MiB, kB);
  void* a = allocator.allocate(64 * MiB, kA);
  ASSERT_LT(q1, a);
  allocator.deallocate(a);
  allocator.deallocate(q1);
  const std::int64_t reserved = allocator.stats().reserved_bytes[kAll].current;
  ASSERT_EQ(reserved, static_cast<std::int64_t>(160 * MiB));
  void* q3 = allocator.allocate(64 * MiB, kB);
  EXPECT_EQ(allocator.stats().reserved_bytes[kAll].current, reserved);
  const auto mapped = mapped_by_stream(allocator);
  EXPECT_EQ(mapped.at(kA), 32 * MiB) << "A gave more than what B's own pages left to cover";
  EXPECT_EQ(mapped.at(kB), 128 * MiB);
  allocator.validate();
  allocator.deallocate(q2);
  allocator.deallocate(q3);
}

TEST(ExpandablePageDonors, AStreamsFrontCacheIsNotTakenBelowTheLimit) {
  // A block freed a moment ago waits in its stream's front cache for the next allocation of
  // its size: the other stream's growth below the limit looks in the bins only.
  auto device = std::make_shared<SimulatedBackend>(64 * GiB);
  CachingAllocator allocator(device, above_peak());
  void* a = allocator.allocate(64 * MiB, kA);
  void* b = allocator.allocate(64 * MiB, kB);
  allocator.deallocate(a);  // the front cache: nothing else is cached in A's pool
  void* b2 = allocator.allocate(64 * MiB, kB);
  EXPECT_EQ(allocator.allocate(64 * MiB, kA), a) << "A's front-cached block was taken";
  allocator.validate();
  allocator.deallocate(b);
  allocator.deallocate(b2);
}

// Many streams whose bins hold cached blocks without a whole page, one donor, and a growth:
// the walk searches the growing stream's two pools and the donor's bins, not every stream's.
class ManyStreamsPageDonors : public ::testing::TestWithParam<const char*> {};

TEST_P(ManyStreamsPageDonors, AGrowthSearchesTheDonorsBinsOnly) {
  auto device = std::make_shared<SimulatedBackend>(1024 * GiB);
  const AllocatorConfig config = AllocatorConfig::parse(
      std::string("expandable_segments:true,expandable_segments_recycling:") + GetParam());
  AllocatorCore core(*device, config);
  constexpr StreamId kStreams = 3000;
  std::vector<void*> kept;
  for (StreamId s = 1; s <= kStreams; ++s) {
    // 4 KiB stays allocated: the rest of its 2 MiB page is cached but holds no whole page.
    kept.push_back(core.allocate(4096, s));
    void* other = core.allocate(8192, s);
    ASSERT_TRUE(core.deallocate(other));
  }
  const StreamId donor = kStreams + 1;
  const StreamId grower = kStreams + 2;
  void* big = core.allocate(64 * MiB, donor);
  void* mine = core.allocate(64 * MiB, grower);
  ASSERT_TRUE(core.deallocate(big));
  core.flush_recent();  // into the donor's bins
  core.validate();
  EXPECT_EQ(page_donors(core), 1U);
  const std::int64_t reserved = core.stats().reserved_bytes[kAll].current;
  const std::uint64_t searched = core.expandable_segments().bins_searched_for_pages();
  void* grown = core.allocate(64 * MiB, grower);
  ASSERT_NE(grown, nullptr);
  EXPECT_EQ(core.stats().reserved_bytes[kAll].current, reserved) << "the donor's pages not taken";
  EXPECT_LE(core.expandable_segments().bins_searched_for_pages() - searched, 3U)
      << "the growth searched the bins of streams with no free page";
  core.validate();
  ASSERT_TRUE(core.deallocate(grown));
  ASSERT_TRUE(core.deallocate(mine));
  for (void* p : kept) ASSERT_TRUE(core.deallocate(p));
  EXPECT_GT(core.empty_cache(), 0U);
  EXPECT_EQ(page_donors(core), 0U);
  core.validate();
}

INSTANTIATE_TEST_SUITE_P(Policies, ManyStreamsPageDonors, ::testing::Values("above_peak", "always"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace memscope

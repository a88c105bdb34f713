// The statistic tables of stats.hpp: every family, single statistic and counter they list
// reaches memory_stats(), memory_summary() and the resets, and the text of both stays the same
// byte for byte (dashboards and scripts read them).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>

#include "memscope/backend.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/errors.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/stats.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

// A state in which every statistic has a value of its own: small and large blocks, a split
// segment, an oversize block, an out-of-memory error with its retry, an invalid free and an
// empty_cache().
class StatsState : public ::testing::Test {
 protected:
  void SetUp() override {
    void* small = allocator.allocate(1000);
    void* medium = allocator.allocate(3 * MiB);
    void* large = allocator.allocate(5 * MiB);
    void* oversize = allocator.allocate(100 * MiB);
    allocator.deallocate(medium);
    allocator.deallocate(oversize);
    EXPECT_THROW((void)allocator.allocate(7 * GiB), OutOfMemoryError);
    EXPECT_FALSE(allocator.try_deallocate(&allocator));
    void* again = allocator.allocate(40 * MiB);
    (void)allocator.empty_cache();
    keep = {small, large, again};
  }
  void TearDown() override {
    for (void* p : keep) allocator.deallocate(p);
  }

  std::shared_ptr<SimulatedBackend> device = std::make_shared<SimulatedBackend>(4 * GiB);
  CachingAllocator allocator{device, AllocatorConfig::parse("max_split_size:64MiB")};
  std::vector<void*> keep;
};

// MemoryStats with every field of every statistic and every counter set, each to its own value.
MemoryStats all_distinct() {
  MemoryStats s;
  std::int64_t next = 1;
  for (const StatFamily& family : kStatFamilies) {
    for (Stat& stat : s.*family.member) {
      for (const StatField& field : kStatFields) stat.*field.member = next++;
    }
  }
  for (const SingleStat& single : kSingleStats) {
    for (const StatField& field : kStatFields) s.*single.member.*field.member = next++;
  }
  for (const StatCounter& counter : kStatCounters) s.*counter.member = next++;
  s.max_split_size = next++;
  return s;
}

TEST(StatTables, EveryFamilyHasAllPoolsAndFieldsInTheFlatMap) {
  const MemoryStats s = all_distinct();
  const std::map<std::string, std::int64_t> flat = s.flatten();
  std::set<std::string> expected;
  for (const StatFamily& family : kStatFamilies) {
    for (std::size_t pool = 0; pool < kStatPools; ++pool) {
      for (const StatField& field : kStatFields) {
        const std::string key = std::string(family.name) + "." + std::string(kStatPoolNames[pool]) +
                                "." + std::string(field.name);
        expected.insert(key);
        ASSERT_TRUE(flat.contains(key)) << key;
        EXPECT_EQ(flat.at(key), (s.*family.member)[pool].*field.member) << key;
      }
    }
  }
  for (const SingleStat& single : kSingleStats) {
    for (const StatField& field : kStatFields) {
      const std::string key = std::string(single.name) + "." + std::string(field.name);
      expected.insert(key);
      ASSERT_TRUE(flat.contains(key)) << key;
      EXPECT_EQ(flat.at(key), s.*single.member.*field.member) << key;
    }
  }
  for (const StatCounter& counter : kStatCounters) {
    expected.insert(std::string(counter.name));
    EXPECT_EQ(flat.at(std::string(counter.name)), s.*counter.member) << counter.name;
  }
  expected.insert("max_split_size");
  EXPECT_EQ(expected.size(), kStatFamilies.size() * kStatPools * kStatFields.size() +
                                 kSingleStats.size() * kStatFields.size() + kStatCounters.size() +
                                 1)
      << "two entries of the tables share a name";
  std::set<std::string> keys;
  for (const auto& [key, value] : flat) keys.insert(key);
  EXPECT_EQ(keys, expected);
  // Every value is distinct, so no two keys read the same member.
  std::set<std::int64_t> values;
  for (const auto& [key, value] : flat) values.insert(value);
  EXPECT_EQ(values.size(), flat.size());
}

TEST(StatTables, TheFamiliesAreTheOnesTorchNames) {
  // A family missing from the tables (or renamed) fails here; one added to MemoryStats but not
  // to the tables fails the static_assert in stats.hpp.
  std::set<std::string_view> names;
  for (const StatFamily& family : kStatFamilies) names.insert(family.name);
  const std::set<std::string_view> torch{
      "allocation",      "segment",        "active",       "inactive_split",
      "allocated_bytes", "reserved_bytes", "active_bytes", "inactive_split_bytes",
      "requested_bytes"};
  EXPECT_EQ(names, torch);
  for (const StatFamily& family : kStatFamilies) {
    EXPECT_EQ(family.in_bytes, family.name.ends_with("_bytes")) << family.name;
  }
}

TEST(StatTables, ResetPeakTouchesOnlyPeaks) {
  const MemoryStats before = all_distinct();
  MemoryStats after = before;
  after.reset_peak();
  for (const StatFamily& family : kStatFamilies) {
    for (std::size_t pool = 0; pool < kStatPools; ++pool) {
      const Stat& a = (after.*family.member)[pool];
      const Stat& b = (before.*family.member)[pool];
      EXPECT_EQ(a.peak, b.current) << family.name;
      EXPECT_EQ(a.current, b.current);
      EXPECT_EQ(a.allocated, b.allocated);
      EXPECT_EQ(a.freed, b.freed);
    }
  }
  for (const SingleStat& single : kSingleStats) {
    EXPECT_EQ((after.*single.member).peak, (before.*single.member).current) << single.name;
  }
  for (const StatCounter& counter : kStatCounters) {
    EXPECT_EQ(after.*counter.member, before.*counter.member) << counter.name;
  }
}

TEST(StatTables, ResetAccumulatedZeroesTotalsAndCounters) {
  const MemoryStats before = all_distinct();
  MemoryStats after = before;
  after.reset_accumulated();
  for (const StatFamily& family : kStatFamilies) {
    for (std::size_t pool = 0; pool < kStatPools; ++pool) {
      const Stat& a = (after.*family.member)[pool];
      const Stat& b = (before.*family.member)[pool];
      EXPECT_EQ(a.allocated, 0) << family.name;
      EXPECT_EQ(a.freed, 0) << family.name;
      EXPECT_EQ(a.current, b.current);
      EXPECT_EQ(a.peak, b.peak);
    }
  }
  for (const SingleStat& single : kSingleStats) {
    EXPECT_EQ((after.*single.member).allocated, 0) << single.name;
    EXPECT_EQ((after.*single.member).freed, 0) << single.name;
  }
  for (const StatCounter& counter : kStatCounters) {
    EXPECT_EQ(after.*counter.member, 0) << counter.name;
  }
  EXPECT_EQ(after.max_split_size, before.max_split_size);  // a setting, not a counter
}

TEST(StatTables, SummaryShowsEveryFamilyAndCounter) {
  const std::string summary = CachingAllocator(make_backend("sim:1GiB")).memory_summary();
  for (const StatFamily& family : kStatFamilies) {
    EXPECT_NE(summary.find(family.summary_label), std::string::npos) << family.name;
  }
  for (const SingleStat& single : kSingleStats) {
    EXPECT_NE(summary.find(single.summary_label), std::string::npos) << single.name;
  }
  for (const StatCounter& counter : kStatCounters) {
    EXPECT_NE(summary.find(std::string(counter.name) + ": "), std::string::npos) << counter.name;
  }
}

TEST_F(StatsState, SnapshotTotalsRebuildEveryFamily) {
  // Every family is above zero in this state, so a family Snapshot::totals() forgets shows.
  const MemoryStats live = allocator.stats();
  const MemoryStats rebuilt = allocator.snapshot().totals();
  for (const StatFamily& family : kStatFamilies) {
    EXPECT_GT((live.*family.member)[0].current, 0) << family.name;
    for (std::size_t pool = 0; pool < kStatPools; ++pool) {
      EXPECT_EQ((rebuilt.*family.member)[pool].current, (live.*family.member)[pool].current)
          << family.name << "." << kStatPoolNames[pool];
    }
  }
}

// The flat keys and values, as memory_stats() gave them before the statistics were listed in
// one table.
constexpr std::string_view kExpectedFlat = R"(active.all.allocated=5
active.all.current=3
active.all.freed=2
active.all.peak=4
active.large_pool.allocated=4
active.large_pool.current=2
active.large_pool.freed=2
active.large_pool.peak=3
active.small_pool.allocated=1
active.small_pool.current=1
active.small_pool.freed=0
active.small_pool.peak=1
active_bytes.all.allocated=155190272
active_bytes.all.current=47186944
active_bytes.all.freed=108003328
active_bytes.all.peak=113247232
active_bytes.large_pool.allocated=155189248
active_bytes.large_pool.current=47185920
active_bytes.large_pool.freed=108003328
active_bytes.large_pool.peak=113246208
active_bytes.small_pool.allocated=1024
active_bytes.small_pool.current=1024
active_bytes.small_pool.freed=0
active_bytes.small_pool.peak=1024
allocated_bytes.all.allocated=155190272
allocated_bytes.all.current=47186944
allocated_bytes.all.freed=108003328
allocated_bytes.all.peak=113247232
allocated_bytes.large_pool.allocated=155189248
allocated_bytes.large_pool.current=47185920
allocated_bytes.large_pool.freed=108003328
allocated_bytes.large_pool.peak=113246208
allocated_bytes.small_pool.allocated=1024
allocated_bytes.small_pool.current=1024
allocated_bytes.small_pool.freed=0
allocated_bytes.small_pool.peak=1024
allocation.all.allocated=5
allocation.all.current=3
allocation.all.freed=2
allocation.all.peak=4
allocation.large_pool.allocated=4
allocation.large_pool.current=2
allocation.large_pool.freed=2
allocation.large_pool.peak=3
allocation.small_pool.allocated=1
allocation.small_pool.current=1
allocation.small_pool.freed=0
allocation.small_pool.peak=1
inactive_split.all.allocated=4
inactive_split.all.current=3
inactive_split.all.freed=1
inactive_split.all.peak=3
inactive_split.large_pool.allocated=3
inactive_split.large_pool.current=2
inactive_split.large_pool.freed=1
inactive_split.large_pool.peak=2
inactive_split.small_pool.allocated=1
inactive_split.small_pool.current=1
inactive_split.small_pool.freed=0
inactive_split.small_pool.peak=1
inactive_split_bytes.all.allocated=35650560
inactive_split_bytes.all.current=17824768
inactive_split_bytes.all.freed=17825792
inactive_split_bytes.all.peak=19921920
inactive_split_bytes.large_pool.allocated=33554432
inactive_split_bytes.large_pool.current=15728640
inactive_split_bytes.large_pool.freed=17825792
inactive_split_bytes.large_pool.peak=17825792
inactive_split_bytes.small_pool.allocated=2096128
inactive_split_bytes.small_pool.current=2096128
inactive_split_bytes.small_pool.freed=0
inactive_split_bytes.small_pool.peak=2096128
max_split_size=67108864
num_alloc_retries=1
num_device_alloc=4
num_device_free=1
num_invalid_frees=1
num_ooms=1
num_sync_all_streams=2
oversize_allocations.allocated=1
oversize_allocations.current=0
oversize_allocations.freed=1
oversize_allocations.peak=1
oversize_segments.allocated=1
oversize_segments.current=0
oversize_segments.freed=1
oversize_segments.peak=1
requested_bytes.all.allocated=155190248
requested_bytes.all.current=47186920
requested_bytes.all.freed=108003328
requested_bytes.all.peak=113247208
requested_bytes.large_pool.allocated=155189248
requested_bytes.large_pool.current=47185920
requested_bytes.large_pool.freed=108003328
requested_bytes.large_pool.peak=113246208
requested_bytes.small_pool.allocated=1000
requested_bytes.small_pool.current=1000
requested_bytes.small_pool.freed=0
requested_bytes.small_pool.peak=1000
reserved_bytes.all.allocated=169869312
reserved_bytes.all.current=65011712
reserved_bytes.all.freed=104857600
reserved_bytes.all.peak=127926272
reserved_bytes.large_pool.allocated=167772160
reserved_bytes.large_pool.current=62914560
reserved_bytes.large_pool.freed=104857600
reserved_bytes.large_pool.peak=125829120
reserved_bytes.small_pool.allocated=2097152
reserved_bytes.small_pool.current=2097152
reserved_bytes.small_pool.freed=0
reserved_bytes.small_pool.peak=2097152
segment.all.allocated=4
segment.all.current=3
segment.all.freed=1
segment.all.peak=3
segment.large_pool.allocated=3
segment.large_pool.current=2
segment.large_pool.freed=1
segment.large_pool.peak=2
segment.small_pool.allocated=1
segment.small_pool.current=1
segment.small_pool.freed=0
segment.small_pool.peak=1
)";

// memory_summary(), as it was before the statistics were listed in one table.
constexpr std::string_view kExpectedSummary =
    R"(========================================================================================
| memscope memory summary, backend sim:4GiB                                            |
| num_alloc_retries: 1      num_ooms: 1      num_sync_all_streams: 2                   |
| num_device_alloc: 4       num_device_free: 1     num_invalid_frees: 1                |
----------------------------------------------------------------------------------------
| Metric                             Current          Peak   Total alloc   Total freed |
----------------------------------------------------------------------------------------
| Allocated memory                 45.00 MiB    108.00 MiB    148.00 MiB    103.00 MiB |
|   from small pool                 1.00 KiB      1.00 KiB      1.00 KiB           0 B |
|   from large pool                45.00 MiB    108.00 MiB    148.00 MiB    103.00 MiB |
----------------------------------------------------------------------------------------
| Active memory                    45.00 MiB    108.00 MiB    148.00 MiB    103.00 MiB |
|   from small pool                 1.00 KiB      1.00 KiB      1.00 KiB           0 B |
|   from large pool                45.00 MiB    108.00 MiB    148.00 MiB    103.00 MiB |
----------------------------------------------------------------------------------------
| Requested memory                 45.00 MiB    108.00 MiB    148.00 MiB    103.00 MiB |
|   from small pool                   1000 B        1000 B        1000 B           0 B |
|   from large pool                45.00 MiB    108.00 MiB    148.00 MiB    103.00 MiB |
----------------------------------------------------------------------------------------
| Reserved memory                  62.00 MiB    122.00 MiB    162.00 MiB    100.00 MiB |
|   from small pool                 2.00 MiB      2.00 MiB      2.00 MiB           0 B |
|   from large pool                60.00 MiB    120.00 MiB    160.00 MiB    100.00 MiB |
----------------------------------------------------------------------------------------
| Non-releasable memory            17.00 MiB     19.00 MiB     34.00 MiB     17.00 MiB |
|   from small pool                 2.00 MiB      2.00 MiB      2.00 MiB           0 B |
|   from large pool                15.00 MiB     17.00 MiB     32.00 MiB     17.00 MiB |
----------------------------------------------------------------------------------------
| Allocations                              3             4             5             2 |
|   from small pool                        1             1             1             0 |
|   from large pool                        2             3             4             2 |
----------------------------------------------------------------------------------------
| Active allocs                            3             4             5             2 |
|   from small pool                        1             1             1             0 |
|   from large pool                        2             3             4             2 |
----------------------------------------------------------------------------------------
| Reserved segments                        3             3             4             1 |
|   from small pool                        1             1             1             0 |
|   from large pool                        2             2             3             1 |
----------------------------------------------------------------------------------------
| Non-releasable allocs                    3             3             4             1 |
|   from small pool                        1             1             1             0 |
|   from large pool                        2             2             3             1 |
----------------------------------------------------------------------------------------
| Oversize allocations                     0             1             1             1 |
| Oversize segments                        0             1             1             1 |
========================================================================================
)";

TEST_F(StatsState, FlatKeysAndValuesAreUnchanged) {
  std::string flat;
  for (const auto& [key, value] : allocator.memory_stats()) {
    flat += key + "=" + std::to_string(value) + "\n";
  }
  EXPECT_EQ(flat, kExpectedFlat);
}

TEST_F(StatsState, SummaryTextIsUnchanged) {
  EXPECT_EQ(allocator.memory_summary(), kExpectedSummary);
}

}  // namespace
}  // namespace memscope

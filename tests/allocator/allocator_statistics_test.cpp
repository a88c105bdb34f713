// AllocatorStatistics through its own interface: the figures it reports (active derived from
// allocation and the waiting blocks, freed derived from the resets' bases) against a model that
// keeps every Stat the plain way, over seeded random sequences of what the core tells it; the
// clock across resets; its invariant checker. Cost: under 0.1 s.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "allocator/allocator_statistics.hpp"
#include "memscope/config.hpp"
#include "memscope/errors.hpp"
#include "memscope/units.hpp"

namespace memscope::detail {
namespace {

// What the statistics must say, kept with Stat::increase()/decrease() on every figure.
struct Model {
  MemoryStats stats;
  void change(StatArray MemoryStats::*family, bool small, std::int64_t amount) {
    for (const std::size_t pool : {kAllPools, pool_index(small)}) {
      Stat& stat = (stats.*family)[pool];
      if (amount >= 0) {
        stat.increase(amount);
      } else {
        stat.decrease(-amount);
      }
    }
  }
};

struct LiveBlock {
  bool small;
  std::size_t size;
  std::size_t requested;
  bool waiting;
};

void expect_same(const MemoryStats& want, const MemoryStats& got, int step) {
  // allocated_bytes, active_bytes, requested_bytes, allocation, active
  for (const StatFamily& family :
       {kStatFamilies[0], kStatFamilies[1], kStatFamilies[2], kStatFamilies[5], kStatFamilies[6]}) {
    for (std::size_t pool = 0; pool < kStatPools; ++pool) {
      const Stat& w = (want.*family.member)[pool];
      const Stat& g = (got.*family.member)[pool];
      ASSERT_EQ(w, g) << family.name << "." << kStatPoolNames[pool] << " at step " << step
                      << ": want current " << w.current << " peak " << w.peak << " allocated "
                      << w.allocated << " freed " << w.freed << ", got " << g.current << " "
                      << g.peak << " " << g.allocated << " " << g.freed;
    }
  }
}

TEST(AllocatorStatistics, ReportsWhatPlainCountersWouldOverRandomSequences) {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    AllocatorStatistics statistics(AllocatorConfig::kUnlimited);
    Model model;
    std::vector<LiveBlock> live;
    for (int step = 0; step < 2000; ++step) {
      const auto op = std::uniform_int_distribution<int>(0, 99)(rng);
      if (op < 45 || live.empty()) {  // an allocation, as the core counts it
        const bool small = (rng() & 1U) != 0;
        const std::size_t size = 512 * std::uniform_int_distribution<std::size_t>(1, 64)(rng);
        const std::size_t requested =
            size - std::uniform_int_distribution<std::size_t>(0, 511)(rng);
        statistics.count_allocation(pool_index(small), size, requested);
        if (statistics.blocks_wait()) statistics.note_active_peaks(small);
        model.change(&MemoryStats::allocation, small, 1);
        model.change(&MemoryStats::allocated_bytes, small, signed_size(size));
        model.change(&MemoryStats::requested_bytes, small, signed_size(requested));
        model.change(&MemoryStats::active, small, 1);
        model.change(&MemoryStats::active_bytes, small, signed_size(size));
        live.push_back({small, size, requested, false});
      } else if (op < 90) {  // a free: cached at once, or waiting for other streams
        const std::size_t i = std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng);
        LiveBlock& b = live[i];
        if (b.waiting) {  // its streams are done
          statistics.stop_waiting(b.small, b.size);
          statistics.uncount_requested(pool_index(b.small), b.requested);
          model.change(&MemoryStats::active, b.small, -1);
          model.change(&MemoryStats::active_bytes, b.small, -signed_size(b.size));
          model.change(&MemoryStats::requested_bytes, b.small, -signed_size(b.requested));
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          statistics.uncount_allocation(pool_index(b.small), b.size);
          model.change(&MemoryStats::allocation, b.small, -1);
          model.change(&MemoryStats::allocated_bytes, b.small, -signed_size(b.size));
          if ((rng() & 3U) == 0) {
            statistics.start_waiting(b.small, b.size);
            b.waiting = true;
          } else {
            statistics.uncount_requested(pool_index(b.small), b.requested);
            model.change(&MemoryStats::active, b.small, -1);
            model.change(&MemoryStats::active_bytes, b.small, -signed_size(b.size));
            model.change(&MemoryStats::requested_bytes, b.small, -signed_size(b.requested));
            live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
          }
        }
      } else if (op < 95) {
        statistics.reset_peaks();
        model.stats.reset_peak();
      } else {
        statistics.reset_accumulated();
        model.stats.reset_accumulated();
      }
      expect_same(model.stats, statistics.report(), step);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(AllocatorStatistics, TheClockRunsOnAcrossResets) {
  AllocatorStatistics statistics(AllocatorConfig::kUnlimited);
  for (int i = 0; i < 5; ++i) statistics.count_allocation(pool_index(true), 512, 1);
  EXPECT_EQ(statistics.clock(), 5U);
  statistics.reset_accumulated();
  EXPECT_EQ(statistics.report().allocation[kAllPools].allocated, 0);
  statistics.count_allocation(pool_index(false), 4 << 20, 1);
  EXPECT_EQ(statistics.clock(), 6U);
}

TEST(AllocatorStatistics, SegmentsMappingAndOversizeCounts) {
  AllocatorStatistics statistics(1 << 20);  // max_split_size 1 MiB: 2 MiB is oversize
  statistics.count_segment(false, 2 << 20);
  statistics.count_segment(true, 2 << 20);
  statistics.change_mapped(false, 4 << 20, 1);
  statistics.change_mapped(false, -(2 << 20), -1);
  statistics.count_allocation(pool_index(false), 2 << 20, 100);
  MemoryStats got = statistics.report();
  EXPECT_EQ(got.segment[kAllPools].current, 2);
  EXPECT_EQ(got.segment[kAllPools].peak, 3);
  EXPECT_EQ(got.reserved_bytes[pool_index(false)].current, 4 << 20);
  EXPECT_EQ(got.oversize_segments.current, 2);
  EXPECT_EQ(got.oversize_allocations.current, 1);
  EXPECT_EQ(got.num_device_alloc, 2);
  EXPECT_EQ(got.max_split_size, 1 << 20);
  statistics.uncount_segment(true, 2 << 20);
  got = statistics.report();
  EXPECT_EQ(got.oversize_segments.current, 1);
  EXPECT_EQ(got.num_device_free, 1);
  EXPECT_EQ(statistics.reserved_bytes(), 4 << 20);
  EXPECT_EQ(AllocatorStatistics(AllocatorConfig::kUnlimited).report().max_split_size, -1);
}

TEST(AllocatorStatistics, TheCheckerNamesAFigureTheBlocksDoNotSay) {
  AllocatorStatistics statistics(AllocatorConfig::kUnlimited);
  statistics.count_allocation(pool_index(true), 1024, 1000);
  MemoryStats expected;
  for (const std::size_t pool : {kAllPools, pool_index(true)}) {
    expected.allocation[pool].current = 1;
    expected.active[pool].current = 1;
    expected.allocated_bytes[pool].current = 1024;
    expected.active_bytes[pool].current = 1024;
    expected.requested_bytes[pool].current = 1000;
  }
  EXPECT_NO_THROW(statistics.check(expected));
  expected.requested_bytes[kAllPools].current = 999;
  try {
    statistics.check(expected);
    ADD_FAILURE() << "a requested_bytes the blocks do not say passed";
  } catch (const InternalError& e) {
    EXPECT_EQ(e.invariant(), "statistics");
    EXPECT_NE(std::string(e.what()).find("requested_bytes.all.current is 1000"), std::string::npos)
        << e.what();
  }
}

TEST(AllocatorStatistics, ARefusalIsCountedWithTheFiguresForItsMessage) {
  AllocatorStatistics statistics(AllocatorConfig::kUnlimited);
  statistics.count_segment(false, 20 * MiB);
  statistics.count_allocation(pool_index(false), 4 * MiB, 4000000);
  const OutOfMemoryError::Figures figures =
      statistics.count_oom(30 * MiB, 64 * MiB, 44 * MiB, 48 * MiB);
  EXPECT_EQ(figures.requested, 30 * MiB);
  EXPECT_EQ(figures.capacity, 64 * MiB);
  EXPECT_EQ(figures.device_free, 44 * MiB);
  EXPECT_EQ(figures.allocated, 4 * MiB);
  EXPECT_EQ(figures.reserved, 20 * MiB);
  EXPECT_EQ(figures.limit, 48 * MiB);
  EXPECT_EQ(statistics.report().num_ooms, 1);
}

}  // namespace
}  // namespace memscope::detail

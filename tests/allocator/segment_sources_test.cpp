// The segment sources through their own interface (SegmentSource), on the simulated device
// with a real BlockStore and AllocatorStatistics and no allocator core: fixed segments reserve
// one segment per growth under the limit, give back whole cached ones (the oversize first at
// the limit) and record both; expandable segments map only the pages a growth lacks, count
// reserved bytes as mapped ones, unmap every whole free page on release and give back a range
// with nothing mapped, and refuse a backend that cannot map pages. Cost: under 0.1 s.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "allocator/allocator_statistics.hpp"
#include "allocator/block_store.hpp"
#include "allocator/expandable/expandable_segments.hpp"
#include "allocator/fixed_segments.hpp"
#include "allocator/front_cache.hpp"
#include "allocator/reclaim.hpp"
#include "allocator/size_rules.hpp"
#include "memscope/config.hpp"
#include "memscope/errors.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope::detail {
namespace {

// Counts what a source asks of its core.
class RecordingHost final : public SourceHost {
 public:
  void flush_front_caches() noexcept override { ++flushes; }
  void record_segment_event(TraceAction action, std::uintptr_t /*address*/, std::size_t bytes,
                            StreamId /*stream*/) noexcept override {
    events.push_back({action, bytes});
  }
  struct Event {
    TraceAction action;
    std::size_t bytes;
  };
  int flushes = 0;
  std::vector<Event> events;
};

// What a source works with, as the core holds it.
struct Parts {
  explicit Parts(AllocatorConfig c, std::size_t limit)
      : config(c),
        memory_limit(limit),
        store(c.expandable_segments),
        statistics(c.max_split_size),
        reclaim(c) {}
  // A growth as the core's miss path makes it: prepared, then the block cached (the core would
  // hand it out) so that release_cached() finds it.
  Block* grow(SegmentSource& source, std::size_t rounded, bool cache = true) {
    store.prepare(2, 1);
    StreamPools& pools = store.pools_for(kDefaultStream);
    Block* b = source.grow(pools, is_small(rounded), rounded);
    if (b != nullptr && cache) FrontCache::cache_in_bins(b);
    return b;
  }
  AllocatorConfig config;
  std::size_t memory_limit;
  SimulatedBackend device{1 * GiB};
  BlockStore store;
  AllocatorStatistics statistics;
  Reclaim reclaim;
  RecordingHost host;
};

TEST(FixedSegments, OneSegmentPerGrowthUnderTheLimitGivenBackWhole) {
  Parts p(AllocatorConfig{}, 64 * MiB);
  FixedSegments source(p.device, p.store, p.statistics, p.reclaim, p.host, p.memory_limit, false);
  Block* b = p.grow(source, 20 * MiB);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->size, segment_size(20 * MiB));
  EXPECT_EQ(p.statistics.reserved_bytes(), static_cast<std::int64_t>(b->size));
  EXPECT_EQ(p.device.reserved_bytes(), b->size);
  EXPECT_TRUE(source.collectable(*b));
  EXPECT_EQ(p.grow(source, 60 * MiB), nullptr);  // past the limit: the backend is not asked
  ASSERT_EQ(p.host.events.size(), 1U);
  EXPECT_EQ(p.host.events[0].action, TraceAction::segment_alloc);
  EXPECT_EQ(source.release_cached(), segment_size(20 * MiB));
  EXPECT_EQ(p.device.reserved_bytes(), 0U);
  EXPECT_EQ(p.statistics.reserved_bytes(), 0);
  EXPECT_EQ(p.store.segments(), nullptr);
  ASSERT_EQ(p.host.events.size(), 2U);
  EXPECT_EQ(p.host.events[1].action, TraceAction::segment_free);
}

TEST(FixedSegments, AtTheLimitTheOversizeSegmentsGoFirst) {
  AllocatorConfig config;
  config.max_split_size = 8 * MiB;
  Parts p(config, 1 * GiB);
  FixedSegments source(p.device, p.store, p.statistics, p.reclaim, p.host, p.memory_limit, false);
  ASSERT_NE(p.grow(source, 16 * MiB), nullptr);
  ASSERT_NE(p.grow(source, 32 * MiB), nullptr);
  StreamPools& pools = p.store.pools_for(kDefaultStream);
  EXPECT_TRUE(source.release_some(pools, 20 * MiB));  // the 32 MiB one alone makes room
  EXPECT_EQ(p.statistics.reserved_bytes(), static_cast<std::int64_t>(16 * MiB));
  EXPECT_FALSE(source.release_some(pools, 64 * MiB));  // 16 MiB released, too little
  EXPECT_EQ(p.statistics.reserved_bytes(), 0);
}

TEST(ExpandableSegments, GrowthMapsOnlyWhatItLacksAndReleaseUnmapsIt) {
  AllocatorConfig config;
  config.expandable_segments = true;
  Parts p(config, 256 * MiB);
  ExpandableSegments source(p.device, p.config, p.store, p.statistics, p.host, p.memory_limit,
                            false);
  Block* a = p.grow(source, 6 * MiB, false);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->segment->expandable);
  const std::size_t page = a->segment->page;
  const std::size_t mapped = (6 * MiB + page - 1) / page * page;
  EXPECT_EQ(p.device.mapped_bytes(), mapped);
  EXPECT_EQ(p.statistics.reserved_bytes(), static_cast<std::int64_t>(mapped));
  EXPECT_EQ(p.statistics.segments(), 1);  // one contiguous mapped run
  a->use.allocated = true;                // as if handed out: a growth maps after it
  Block* b = p.grow(source, 6 * MiB, false);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->segment, a->segment);  // the stream's one growing segment
  EXPECT_GE(b->address, a->address + a->size);
  EXPECT_EQ(p.statistics.segments(), 1);
  FrontCache::cache_in_bins(b);
  EXPECT_TRUE(source.collectable(*b));
  const std::size_t released = source.release_cached();
  EXPECT_GT(released, 0U);
  EXPECT_EQ(p.device.mapped_bytes(), static_cast<std::size_t>(p.statistics.reserved_bytes()));
  EXPECT_LT(p.device.mapped_bytes(), 2 * mapped);
  a->use.allocated = false;
  FrontCache::cache_in_bins(a);
  source.release_cached();  // nothing mapped: the range goes back
  EXPECT_EQ(p.device.mapped_bytes(), 0U);
  EXPECT_EQ(p.store.segments(), nullptr);
  EXPECT_EQ(p.statistics.reserved_bytes(), 0);
}

TEST(ExpandableSegments, ABackendThatCannotMapPagesIsRefusedNamingTheSetting) {
  AllocatorConfig config;
  config.expandable_segments = true;
  config.expandable_segments_page_size = 3 * KiB;  // not a multiple of any granularity
  Parts p(config, 1 * GiB);
  try {
    ExpandableSegments source(p.device, p.config, p.store, p.statistics, p.host, p.memory_limit,
                              false);
    ADD_FAILURE() << "a page size the backend cannot map was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("expandable_segments_page_size"), std::string::npos)
        << e.what();
  }
  // Off, the source checks nothing: a fixed-segment allocator holds one too.
  p.config.expandable_segments = false;
  EXPECT_NO_THROW(
      ExpandableSegments(p.device, p.config, p.store, p.statistics, p.host, p.memory_limit, false));
}

}  // namespace
}  // namespace memscope::detail

// PyTorch snapshots on small hand-built values: typed reading with named errors, the replay
// plan's starting live set and figures, contradictions, and replay through memscope.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "allocator_invariants.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/trace.hpp"
#include "pickle_test_util.hpp"

namespace memscope {
namespace {

using testing::num;
using testing::str;

PickleValue dict(const std::vector<std::pair<const char*, PickleValue>>& fields) {
  std::vector<PickleDict::Item> items;
  items.reserve(fields.size());
  for (const auto& [k, v] : fields) items.emplace_back(str(k), v);
  return PickleValue{PickleDict(std::move(items))};
}

PickleValue list(std::vector<PickleValue> items) {
  return PickleList{std::move(items)};
}

PickleValue event(const char* action, std::int64_t addr, PickleValue size) {
  return dict({{"action", str(action)},
               {"addr", num(addr)},
               {"size", std::move(size)},
               {"stream", num(0)},
               {"time_us", num(1)},
               {"frames", list({})}});
}

PickleValue event(const char* action, std::int64_t addr, std::int64_t size) {
  return event(action, addr, num(size));
}

PickleValue block(std::int64_t addr, std::int64_t size, std::int64_t requested, const char* state) {
  return dict({{"address", num(addr)},
               {"size", num(size)},
               {"requested_size", num(requested)},
               {"state", str(state)},
               {"frames", list({})}});
}

PickleValue segment(std::int64_t addr, std::int64_t total, std::vector<PickleValue> blocks) {
  return dict({{"device", num(0)},
               {"address", num(addr)},
               {"total_size", num(total)},
               {"stream", num(0)},
               {"segment_type", str("large")},
               {"blocks", list(std::move(blocks))}});
}

constexpr std::int64_t kMiB = 1 << 20;
constexpr std::int64_t kBase = std::int64_t{1} << 34;

// One 20 MiB segment: X (active, never allocated in the trace: starting set b), Y (allocated in
// the trace and still active), then free space. The trace also frees Z, which it never
// allocated (starting set a).
PickleValue small_snapshot(PickleValue first_size = num(3 * kMiB / 2)) {
  const std::int64_t x = kBase, y = kBase + 2 * kMiB, z = kBase + 4 * kMiB;
  return dict({
      {"segments", list({segment(kBase, 20 * kMiB,
                                 {block(x, 2 * kMiB, 2 * kMiB - 5, "active_allocated"),
                                  block(y, 2 * kMiB, 3 * kMiB / 2, "active_allocated"),
                                  block(z, 16 * kMiB, 0, "inactive")})})},
      {"device_traces",
       list({list({event("alloc", y, std::move(first_size)), event("free_requested", z, 1000),
                   event("free_completed", z, 1000), event("alloc", z, 7 * kMiB),
                   event("segment_alloc", kBase, 20 * kMiB),
                   event("free_completed", z, 7 * kMiB)})})},
      {"allocator_settings", dict({})},
  });
}

TEST(TorchSnapshot, ReadsSegmentsBlocksAndEvents) {
  const TorchSnapshot s = read_torch_snapshot(small_snapshot(), "small.pickle");
  ASSERT_EQ(s.segments.size(), 1U);
  const SegmentInfo& seg = s.segments[0].info;
  EXPECT_EQ(seg.address, static_cast<std::uintptr_t>(kBase));
  EXPECT_FALSE(seg.small_pool);
  ASSERT_EQ(seg.blocks.size(), 3U);
  EXPECT_EQ(seg.blocks[1].requested_size, static_cast<std::size_t>(3 * kMiB / 2));
  EXPECT_EQ(seg.blocks[2].state, BlockState::inactive);
  // Sizes left out of the segment are rebuilt from its blocks.
  EXPECT_EQ(seg.allocated_size, static_cast<std::size_t>(4 * kMiB));
  ASSERT_EQ(s.device_traces.size(), 1U);
  ASSERT_EQ(s.device_traces[0].size(), 6U);
  EXPECT_EQ(s.device_traces[0][2].action, TraceAction::free_completed);
  EXPECT_STREQ(to_string(s.device_traces[0][4].action), "segment_alloc");
  EXPECT_EQ(s.device_traces[0][0].time_us, 1);
}

TEST(TorchSnapshot, PlanRebuildsTheStartingLiveSet) {
  const ReplayPlan plan = build_replay_plan(read_torch_snapshot(small_snapshot()));
  EXPECT_EQ(plan.starting_frees, 1U);   // Z
  EXPECT_EQ(plan.starting_active, 1U);  // X
  EXPECT_EQ(plan.starting_blocks(), 2U);
  EXPECT_EQ(plan.traced_ops, 4U);  // free_requested and segment_alloc are not replayed
  ASSERT_EQ(plan.ops.size(), 6U);
  EXPECT_EQ(plan.ops[0].addr, static_cast<std::uint64_t>(kBase + 4 * kMiB));  // (a) first
  EXPECT_EQ(plan.ops[0].size, 1000U);
  EXPECT_EQ(plan.ops[1].addr, static_cast<std::uint64_t>(kBase));  // then (b)
  EXPECT_FALSE(plan.ops[1].is_free);
  EXPECT_TRUE(plan.ops[3].is_free);
  EXPECT_EQ(plan.live_before, static_cast<std::size_t>(1000 + 2 * kMiB - 5));
  const auto x = static_cast<std::size_t>(2 * kMiB - 5), y = static_cast<std::size_t>(3 * kMiB / 2);
  EXPECT_EQ(plan.peak_live, x + y + static_cast<std::size_t>(7 * kMiB));
  EXPECT_EQ(plan.live_at_end, x + y);
  EXPECT_EQ(plan.active_at_dump, x + y);
  EXPECT_TRUE(plan.ends_as_snapshot());
  EXPECT_EQ(plan.reserved_at_dump, static_cast<std::size_t>(20 * kMiB));
  EXPECT_EQ(plan.large_segments_at_dump, 1U);
  EXPECT_EQ(plan.distinct_sizes, 2U);
}

// Two allocations of 2^63 - 1 bytes used to give a peak live of 2^64 - 2 (negative wherever
// it became a signed statistic); a third wrapped around. Totals past 2^63 - 1 are refused.
TEST(TorchSnapshot, LiveBytesPast2To63AreATypedError) {
  constexpr std::uint64_t kHuge = (std::uint64_t{1} << 63) - 1;
  TorchSnapshot s;
  s.device_traces.push_back({{TraceAction::alloc, 0x1000, kHuge}});
  EXPECT_EQ(build_replay_plan(s).peak_live, kHuge);  // exactly representable: fine
  s.device_traces[0].push_back({TraceAction::alloc, 0x2000, kHuge});
  try {
    (void)build_replay_plan(s);
    FAIL() << "no error";
  } catch (const TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("live bytes at the alloc of 0x2000 passes 2^63 - 1"),
              std::string::npos)
        << e.what();
  }
}

TEST(TorchSnapshot, ErrorsNameTheFileAndTheField) {
  const auto message = [](const PickleValue& root) -> std::string {
    try {
      (void)build_replay_plan(read_torch_snapshot(root, "snap.pickle"));
    } catch (const TraceFormatError& e) {
      return e.what();
    }
    return "accepted";
  };
  const PickleValue bad_size = small_snapshot(str("12"));
  EXPECT_EQ(message(bad_size), "snap.pickle: device_traces[0][0].size: expected int, found str");

  EXPECT_EQ(message(dict({{"segments", list({dict({{"address", num(0)}})})}})),
            "snap.pickle: segments[0]: missing the field 'total_size'");
  EXPECT_EQ(message(list({})),
            "the snapshot has no trace for device 0 (record it with "
            "torch.cuda.memory._record_memory_history())");
  EXPECT_EQ(message(num(3)), "snap.pickle: the snapshot: expected dict, found int");
  const auto with_events = [](std::vector<PickleValue> events) {
    return dict({{"segments", list({})}, {"device_traces", list({list(std::move(events))})}});
  };
  EXPECT_NE(message(with_events({event("teleport", 0, 1)})).find("unknown action 'teleport'"),
            std::string::npos);
  EXPECT_NE(message(with_events({event("alloc", 4096, 1), event("alloc", 4096, 1)}))
                .find("device_traces[0][1]: alloc of address 0x1000, which is already live"),
            std::string::npos);
  EXPECT_NE(message(with_events({event("alloc", 4096, 1), event("free_completed", 4096, 1),
                                 event("free_completed", 4096, 1)}))
                .find("device_traces[0][2]: free of address 0x1000, which is not live"),
            std::string::npos);
  EXPECT_NE(message(with_events({event("alloc", -1, 1)})).find("non-negative"), std::string::npos);
}

TEST(TorchSnapshot, ReplayThroughMemscopeEndsAsTheSnapshot) {
  const ReplayPlan plan = build_replay_plan(read_torch_snapshot(small_snapshot()));
  CachingAllocator allocator(std::make_shared<SimulatedBackend>(GiB), AllocatorConfig{});
  const ReplayResult r = replay(plan, allocator, true);
  EXPECT_EQ(r.operations, 6U);
  EXPECT_EQ(r.num_ooms, 0);
  EXPECT_EQ(r.peak_requested, static_cast<std::int64_t>(plan.peak_live));
  EXPECT_EQ(r.final_stats.requested_bytes[0].current,
            static_cast<std::int64_t>(plan.active_at_dump));
  EXPECT_EQ(r.live_pointers.size(), 2U);
  ASSERT_EQ(r.series.size(), 6U);
  EXPECT_EQ(r.series.back().requested_bytes, static_cast<std::int64_t>(plan.live_at_end));
  EXPECT_GE(r.peak_reserved, r.peak_allocated);
  EXPECT_GE(r.peak_allocated, r.peak_requested);
  EXPECT_TRUE(testing::allocator_consistent(allocator));
  for (void* p : r.live_pointers) allocator.deallocate(p);
  EXPECT_EQ(allocator.stats().allocation[0].current, 0);
}

TEST(TorchSnapshot, ReplayCountsOutOfMemoryAndGoesOn) {
  const ReplayPlan plan = build_replay_plan(read_torch_snapshot(small_snapshot()));
  ReplayOptions options;
  options.capacity = 8 * MiB;  // the 7 MiB request needs a 20 MiB segment: refused
  const ReplayResult r = replay(plan, options);
  EXPECT_EQ(r.num_ooms, 3);  // X and Y need 20 MiB segments too; Z's 1000 bytes fit
  EXPECT_EQ(r.final_stats.num_ooms, 3);
  EXPECT_TRUE(r.live_pointers.empty());
}

}  // namespace
}  // namespace memscope

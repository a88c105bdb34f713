// Issue 43, part 2: PyTorch's expandable segments at capacity (bench/torch_expandable_capacity.hpp)
// unmap the whole pages of free blocks and fill the holes first, on hand-checked sequences; keep
// their bookkeeping under a tight limit on random steps; place every block where the model
// without a limit does (torch_expandable_rules.hpp) when there is room; and memscope's expandable
// default fits a device no larger than they need, on the corpus (MEMSCOPE_TRACES; skipped without
// it), on the three-stream steps and on random steps, once and 10 times back to back.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "capacity_fit.hpp"
#include "memscope/trace.hpp"
#include "memscope/units.hpp"
#include "multi_stream_plan.hpp"
#include "random_step_plan.hpp"
#include "test_scale.hpp"
#include "torch_expandable_capacity.hpp"
#include "torch_expandable_rules.hpp"
#include "trace_corpus.hpp"

namespace memscope {
namespace {

using bench::TorchExpandableCapacityReplayer;

ReplayOp alloc(std::uint64_t id, std::size_t size, StreamId stream = kDefaultStream) {
  return {false, id, size, stream};
}
ReplayOp release(std::uint64_t id) {
  return {true, id, 0, kDefaultStream};
}

TEST(TorchExpandableAtCapacity, ReleaseUnmapsTheWholePagesOfFreeBlocksThenRetries) {
  // 100 MiB device, 20 MiB pages. 30 MiB at offset 0 (two pages mapped), 50 MiB at 30 (two
  // more: 80 MiB), the first freed. 40 MiB more: no free block fits, and mapping two more pages
  // would pass the limit: release_cached_blocks unmaps the free block's one whole page [0, 20)
  // (the page it shares with the 50 MiB block stays mapped), and the retry maps [80, 120).
  TorchExpandableCapacityReplayer model(100 * MiB);
  for (const ReplayOp& op : {alloc(1, 30 * MiB), alloc(2, 50 * MiB), release(1)}) {
    ASSERT_TRUE(model.step(op));
    model.check_invariants();
  }
  EXPECT_EQ(model.reserved_bytes(), 80 * MiB);
  ASSERT_TRUE(model.step(alloc(3, 40 * MiB)));
  model.check_invariants();
  EXPECT_EQ(model.result().num_alloc_retries, 1U);
  EXPECT_EQ(model.result().unmap_calls, 1U);
  EXPECT_EQ(model.result().pages_unmapped, 1U);
  EXPECT_EQ(model.result().offsets.back(), 80 * MiB);  // the hole below holds 30 MiB only
  EXPECT_EQ(model.reserved_bytes(), 100 * MiB);
}

TEST(TorchExpandableAtCapacity, GrowthFillsTheLowestHoleFirst) {
  // Blocks of 40, 20 and 40 MiB on 20 MiB pages, the first freed. 80 MiB more fits nowhere, even
  // with the free block's pages unmapped (60 live + 80 > 120): out of memory, with [0, 40)
  // unmapped. A 20 MiB request then maps into that hole, at offset 0.
  TorchExpandableCapacityReplayer model(120 * MiB);
  for (const ReplayOp& op :
       {alloc(1, 40 * MiB), alloc(2, 20 * MiB), alloc(3, 40 * MiB), release(1)}) {
    ASSERT_TRUE(model.step(op));
  }
  EXPECT_FALSE(model.step(alloc(4, 80 * MiB)));
  model.check_invariants();
  EXPECT_EQ(model.result().ooms, 1U);
  EXPECT_EQ(model.reserved_bytes(), 60 * MiB);
  ASSERT_TRUE(model.step(alloc(5, 20 * MiB)));
  model.check_invariants();
  EXPECT_EQ(model.result().offsets.back(), 0U);
  EXPECT_EQ(model.reserved_bytes(), 80 * MiB);
}

TEST(TorchExpandableAtCapacity, AWhollyUnmappedRangeIsGivenBack) {
  // 60 MiB device. Stream 1's small range holds one free 2 MiB page; 60 MiB on stream 0 (three
  // 20 MiB pages) fits only once that page is unmapped, which leaves its range wholly unmapped:
  // given back, so stream 1's next small block opens a third range.
  TorchExpandableCapacityReplayer model(60 * MiB);
  for (const ReplayOp& op : {alloc(1, 4 * KiB, 1), release(1), alloc(2, 60 * MiB)}) {
    ASSERT_TRUE(model.step(op));
    model.check_invariants();
  }
  EXPECT_EQ(model.reserved_bytes(), 60 * MiB);
  EXPECT_EQ(model.result().pages_unmapped, 1U);
  EXPECT_EQ(model.result().ranges, 2U);
  for (const ReplayOp& op : {release(2), alloc(3, 4 * KiB, 1)}) {
    ASSERT_TRUE(model.step(op));
    model.check_invariants();
  }
  EXPECT_EQ(model.result().ranges, 3U);
  EXPECT_EQ(model.result().pages_unmapped, 4U);
  EXPECT_EQ(model.reserved_bytes(), 2 * MiB);
}

// With room for everything the model places every block where the model that never unmaps does:
// same offsets, same mapped bytes after every op (random steps of several streams, and the
// three-stream steps).
TEST(TorchExpandableAtCapacity, WithoutALimitPlacesAsTheModelThatNeverUnmaps) {
  std::vector<ReplayPlan> plans;
  for (std::uint64_t seed = 1; seed <= testing::scaled_seeds(200); ++seed) {
    plans.push_back(testing::random_step(seed));
  }
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    plans.push_back(bench::three_stream_training_step(seed));
  }
  for (std::size_t i = 0; i < plans.size(); ++i) {
    SCOPED_TRACE("plan " + std::to_string(i));
    const auto expected = bench::replay_torch_expandable(plans[i]);
    TorchExpandableCapacityReplayer model;
    const auto got = model.run(plans[i]);
    ASSERT_NO_THROW(model.check_invariants());
    EXPECT_EQ(got.ooms, 0U);
    EXPECT_EQ(got.offsets, expected.offsets);
    EXPECT_EQ(got.reserved_series, expected.reserved_series);
    EXPECT_EQ(got.map_calls, expected.map_calls);
    EXPECT_EQ(got.pages_mapped, expected.pages_mapped);
  }
}

// Random steps of two streams under a tight limit (fixed seeds): the bookkeeping after every op,
// mapped bytes never over the limit, a refusal leaves what is allocated unchanged.
TEST(TorchExpandableAtCapacity, RandomStepsKeepTheirBookkeeping) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::uint64_t> live;
    TorchExpandableCapacityReplayer model(256 * MiB);
    std::size_t refused = 0;
    std::size_t steps = 0;
    for (std::uint64_t id = 1; steps < 3000; ++id, ++steps) {
      ReplayOp op;
      if (!live.empty() && (rng() % 100 < 45 || live.size() > 60)) {
        const std::size_t at = rng() % live.size();
        op = release(live[at]);
        live[at] = live.back();
        live.pop_back();
      } else {
        const double exponent = std::uniform_real_distribution<double>(9.0, 26.0)(rng);
        op = alloc(id, static_cast<std::size_t>(std::exp2(exponent)),
                   static_cast<StreamId>(rng() % 2));
      }
      if (model.step(op)) {
        if (!op.is_free) live.push_back(op.addr);
      } else {
        ++refused;
      }
      ASSERT_NO_THROW(model.check_invariants()) << "seed " << seed << ", step " << steps;
      ASSERT_LE(model.reserved_bytes(), 256 * MiB);
    }
    EXPECT_GT(refused, 0U) << "seed " << seed << ": the limit was never reached";
    EXPECT_GT(model.result().pages_unmapped, 0U);
  }
}

void expect_memscope_fits_no_larger(const ReplayPlan& plan, int iterations) {
  const bench::CapacityFit fit = bench::fit_both_expandable(plan, iterations);
  ASSERT_NE(fit.torch, 0U) << iterations
                           << " iterations: PyTorch's expandable segments fit nowhere";
  ASSERT_NE(fit.memscope, 0U) << iterations << " iterations: memscope fits nowhere";
  EXPECT_LE(fit.memscope, fit.torch) << iterations << " iterations: memscope needs " << fit.memscope
                                     << " bytes, PyTorch's expandable segments " << fit.torch;
  EXPECT_GE(fit.torch, plan.peak_live);
}

// The goal of issue 43 on the corpus: memscope with expandable_segments:true (its default page
// recycling) fits a device no larger than PyTorch's expandable segments need, 1 and 10
// iterations (docs/benchmarks.md, "At capacity").
TEST(TorchExpandableAtCapacity, CorpusFitsMemscopeNoLargerThanPyTorchsExpandableSegments) {
  const auto traces = testing::scaled_traces(corpus::all_traces(), corpus::kSmallTrainStep);
  if (traces.empty())
    GTEST_SKIP() << "no traces in " << corpus::traces_dir() << " (MEMSCOPE_TRACES)";
  for (const auto& path : traces) {
    SCOPED_TRACE(path.filename().string());
    const TorchSnapshot snapshot = read_trace_file(path);
    const ReplayPlan plan = build_replay_plan(snapshot, trace_devices(snapshot).at(0));
    for (const int iterations : {1, testing::scaled_iterations(10)}) {
      expect_memscope_fits_no_larger(plan, iterations);
    }
  }
}

// ... on several streams: the three-stream steps and random steps drawn from seeds.
TEST(TorchExpandableAtCapacity, SeveralStreamsFitMemscopeNoLargerThanPyTorchsExpandableSegments) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE("three-stream step seed " + std::to_string(seed));
    for (const int iterations : {1, testing::scaled_iterations(10)}) {
      expect_memscope_fits_no_larger(bench::three_stream_training_step(seed), iterations);
    }
  }
  for (std::uint64_t seed = 1; seed <= testing::scaled_seeds(100); ++seed) {
    SCOPED_TRACE("random_step seed " + std::to_string(seed));
    expect_memscope_fits_no_larger(testing::random_step(seed), testing::scaled_iterations(3));
  }
}

}  // namespace
}  // namespace memscope

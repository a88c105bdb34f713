// The reference models of PyTorch's placement: the default rules (bench/torch_rules.hpp) on a
// plan built so that the tie rule decides the peak, and memscope's allocator following its own
// documented rule on it; expandable_segments:True (bench/torch_expandable_rules.hpp) on small
// hand-checked sequences, a random one against its own bookkeeping, and the real trace.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "memscope/simulated_backend.hpp"
#include "memscope/trace.hpp"
#include "steady_state.hpp"
#include "test_scale.hpp"
#include "torch_expandable_rules.hpp"
#include "torch_rules.hpp"
#include "trace_corpus.hpp"

namespace memscope {
namespace {

ReplayPlan plan_of(std::initializer_list<ReplayOp> ops) {
  ReplayPlan plan;
  plan.ops = ops;
  return plan;
}

ReplayOp alloc(std::uint64_t id, std::size_t size) {
  return {false, id, size, kDefaultStream};
}
ReplayOp release(std::uint64_t id) {
  return {true, id, 0, kDefaultStream};
}

// Two 20 MiB segments each end up with a free 8 MiB block at their start. The next 8 MiB request
// takes the older segment's (lowest address) or the newer one's (most recent); only the second
// choice lets the older segment empty out and serve a 20 MiB request without a third segment.
ReplayPlan tie_decides_the_peak() {
  return plan_of({alloc(1, 8 * MiB), alloc(2, 8 * MiB), alloc(3, 8 * MiB), alloc(4, 8 * MiB),
                  release(1), release(3), alloc(5, 8 * MiB), release(2), alloc(6, 20 * MiB)});
}

TEST(TorchRules, TheTieRuleCanDecideThePeak) {
  const ReplayPlan plan = tie_decides_the_peak();
  const auto lowest = bench::replay_torch_rules(plan, bench::TieBreak::lowest_address);
  const auto recent = bench::replay_torch_rules(plan, bench::TieBreak::most_recent);
  EXPECT_EQ(lowest.peak_reserved, 60 * MiB);
  EXPECT_EQ(lowest.segments, 3U);
  EXPECT_EQ(recent.peak_reserved, 40 * MiB);
  EXPECT_EQ(recent.segments, 2U);
  EXPECT_EQ(lowest.ties, 1U);                  // the 8 MiB request, with two 8 MiB blocks cached
  EXPECT_EQ(lowest.cache_hits, 3U);            // and the 20 MiB request misses
  EXPECT_EQ(lowest.peak_requested, 36 * MiB);  // 8 + 8 + 20 at the end
}

TEST(TorchRules, MemscopeBreaksTiesByLowestAddressInAReplay) {
  // docs/size-rules.md: among equal sizes the lowest address serves, as PyTorch's rules take,
  // front-cached blocks included off the hot path (a replay's peak window keeps every call
  // there). Until the random steps of tests/trace/random_steady_test.cpp, the newest
  // front-cached block served instead (40 MiB here), and on other plans reserved more than
  // PyTorch's rules (seed 229: 1.5073 of the live peak against 1.4655).
  ReplayOptions options;
  options.capacity = GiB;
  options.record_series = true;
  const ReplayResult ours = replay(tie_decides_the_peak(), options);
  const auto model =
      bench::replay_torch_rules(tie_decides_the_peak(), bench::TieBreak::lowest_address);
  EXPECT_EQ(ours.peak_reserved, static_cast<std::int64_t>(model.peak_reserved));
  ASSERT_EQ(ours.series.size(), model.reserved_series.size());
  for (std::size_t i = 0; i < ours.series.size(); ++i) {
    EXPECT_EQ(ours.series[i].reserved_bytes, static_cast<std::int64_t>(model.reserved_series[i]))
        << "after op " << i;
  }
}

// Random steps of one stream (fixed seeds): memscope's default rules reserve what PyTorch's rules
// with memscope's tie rule reserve, after every op. The front cache of recently freed blocks must
// hand out only the block best fit would find (issue 25: the allocation path once took an older
// front-cached block of the same size, which best fit would not, and reserved more).
ReplayPlan random_steps(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::size_t sizes[] = {4 * KiB, 300 * KiB, 1 * MiB,  3 * MiB,
                               8 * MiB, 12 * MiB,  26 * MiB, 40 * MiB};
  ReplayPlan plan;
  std::vector<std::uint64_t> live;
  std::uint64_t next_id = 1;
  for (int i = 0; i < 600; ++i) {
    if (live.empty() || rng() % 100 < 55) {
      live.push_back(next_id);
      plan.ops.push_back(alloc(next_id++, sizes[rng() % std::size(sizes)]));
    } else {
      // Mostly the newest (stack-like, as a step frees), sometimes any.
      const std::size_t at = rng() % 3 == 0 ? rng() % live.size() : live.size() - 1;
      plan.ops.push_back(release(live[at]));
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(at));
    }
  }
  return plan;
}

// The bins' rules (best fit, split, merge) on their own: stats() after every op merges every
// front-cached block into the bins, as a replay's series once did (until 4256ca9 polled
// current_bytes() instead, which leaves the front cache alone: then a front hit may take a block
// best fit would not, docs/design.md "Front cache", and this comparison no longer holds).
TEST(TorchRules, MemscopeReservesAsTheRulesOnRandomSteps) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const ReplayPlan plan = random_steps(seed);
    CachingAllocator allocator(std::make_shared<SimulatedBackend>(64 * GiB), AllocatorConfig{});
    std::map<std::uint64_t, void*> live;
    const auto model = bench::replay_torch_rules(plan, bench::TieBreak::lowest_address);
    ASSERT_EQ(plan.ops.size(), model.reserved_series.size());
    for (std::size_t i = 0; i < plan.ops.size(); ++i) {
      const ReplayOp& op = plan.ops[i];
      if (op.is_free) {
        allocator.deallocate(live.at(op.addr));
        live.erase(op.addr);
      } else {
        live[op.addr] = allocator.allocate(op.size, op.stream);
      }
      const MemoryStats stats = allocator.stats();  // merges the front caches
      ASSERT_EQ(stats.reserved_bytes[static_cast<std::size_t>(StatPool::all)].current,
                static_cast<std::int64_t>(model.reserved_series[i]))
          << "seed " << seed << ", after op " << i;
    }
    for (const auto& [addr, ptr] : live) allocator.deallocate(ptr);
  }
}

// Issue 25, on every trace of the corpus (MEMSCOPE_TRACES; skipped without it): memscope's
// default rules reserve no more than PyTorch's (the model, ties to the lowest address) in each of
// three iterations back to back, the second and third on the cache the earlier ones left. The
// front cache once handed out older blocks best fit would not (the compiled GPT-2 step: 1.0831
// -> 1.1234 from its second iteration, PyTorch 1.0831; cs336-medium ctx128: 1.0340 against
// 1.0280). Two traces still miss (docs/design.md, "Front cache": a hit just above a free block):
// they must not get worse than measured.
TEST(TorchRules, CorpusNeverAbovePyTorchInTheSteadyState) {
  const auto traces = testing::scaled_traces(corpus::all_traces(), corpus::kSmallTrainStep);
  if (traces.empty())
    GTEST_SKIP() << "no traces in " << corpus::traces_dir() << " (MEMSCOPE_TRACES)";
  const std::map<std::string, double> known_misses = {
      {"torch_snapshot_cs336-xl_ctx256_bs4_fwd_bf16.pickle", 1.0429},
      {"torch_snapshot_octree-nca2d_wsi_inference.pickle", 1.3466}};
  for (const auto& path : traces) {
    SCOPED_TRACE(path.filename().string());
    const TorchSnapshot snapshot = read_trace_file(path);
    const ReplayPlan plan = build_replay_plan(snapshot, trace_devices(snapshot).at(0));
    const int iterations = testing::scaled_iterations(3);
    const auto ours = bench::memscope_steady_state(plan, "", iterations);
    bench::TorchRulesReplayer model(bench::TieBreak::lowest_address);
    const auto theirs = bench::model_steady_state(plan, model, iterations);
    const auto miss = known_misses.find(path.filename().string());
    for (std::size_t i = 0; i < ours.ratios.size(); ++i) {
      const double bound = miss != known_misses.end() ? miss->second : theirs.ratios[i];
      EXPECT_LE(ours.ratios[i], bound + 0.00005)
          << "iteration " << i + 1 << ": memscope " << ours.ratios[i] << ", PyTorch's rules "
          << theirs.ratios[i];
    }
  }
}

// ---- expandable_segments:True ----------------------------------------------------------------

ReplayOp alloc_on(std::uint64_t id, std::size_t size, StreamId stream) {
  return {false, id, size, stream};
}

TEST(TorchExpandableRules, GrowsAtTheLowestAddressInWholePages) {
  // 3 MiB maps one 20 MiB page; 5 MiB fits in the free rest (no other free block); the segment
  // then holds [3 | 5 | 12 free]. 14 MiB does not fit: the free 12 MiB just below the unmapped
  // tail is grown by one more page, so 14 MiB starts at 8 MiB, not at 20 MiB.
  const auto r = bench::replay_torch_expandable(
      plan_of({alloc(1, 3 * MiB), alloc(2, 5 * MiB), alloc(3, 14 * MiB)}));
  EXPECT_EQ(r.offsets, (std::vector<std::uint64_t>{0, 3 * MiB, 8 * MiB}));
  EXPECT_EQ(r.reserved_series, (std::vector<std::size_t>{20 * MiB, 20 * MiB, 40 * MiB}));
  EXPECT_EQ(r.map_calls, 2U);
  EXPECT_EQ(r.pages_mapped, 2U);
  EXPECT_EQ(r.segments, 1U);
  EXPECT_EQ(r.cache_hits, 1U);
}

TEST(TorchExpandableRules, TheFreeBlockBeforeTheTailMergesWithNewPages) {
  // After 3 MiB, 17 MiB lie free below the unmapped tail. 30 MiB needs 13 MiB more: one page
  // merged with the free 17 MiB (40 MiB mapped), where a fresh block would need two (60 MiB).
  const auto r = bench::replay_torch_expandable(plan_of({alloc(1, 3 * MiB), alloc(2, 30 * MiB)}));
  EXPECT_EQ(r.offsets, (std::vector<std::uint64_t>{0, 3 * MiB}));
  EXPECT_EQ(r.peak_reserved, 40 * MiB);
  EXPECT_EQ(r.map_calls, 2U);  // one map_block call each time, however many pages
  EXPECT_EQ(r.pages_mapped, 2U);
}

TEST(TorchExpandableRules, RoundsToPagesOfTwentyAndTwoMiB) {
  const auto r = bench::replay_torch_expandable(plan_of({
      alloc(1, MiB + 1),      // large pool (1 MiB + 512 after rounding): one 20 MiB page
      alloc(2, 512),          // small pool: its own segment, one 2 MiB page
      release(1),             // the whole 20 MiB page is free again (never unmapped)
      alloc(3, 41 * MiB),     // 41 MiB: 20 free + two more pages = 60 MiB of large pool
      alloc(4, 1),            // 512 B: in the small pool's free rest
      alloc(5, 2 * MiB - 1),  // large pool (over 1 MiB): 19 MiB free after the 41 MiB, fits
  }));
  EXPECT_EQ(r.reserved_series,
            (std::vector<std::size_t>{20 * MiB, 22 * MiB, 22 * MiB, 62 * MiB, 62 * MiB, 62 * MiB}));
  EXPECT_EQ(r.offsets, (std::vector<std::uint64_t>{0, 0, 0, 512, 41 * MiB}));
  EXPECT_EQ(r.segments, 2U);  // one per pool
  EXPECT_EQ(r.pages_mapped, 4U);
  EXPECT_EQ(r.peak_allocated, 41 * MiB + 2 * MiB + 1024);
}

TEST(TorchExpandableRules, PageSizeIsASetting) {
  bench::ExpandableRules rules;
  rules.large_page = 2 * MiB;
  const auto r =
      bench::replay_torch_expandable(plan_of({alloc(1, 3 * MiB), alloc(2, 30 * MiB)}), rules);
  EXPECT_EQ(r.peak_reserved, 34 * MiB);  // 4 MiB, then 1 MiB free + 15 pages
  EXPECT_EQ(r.pages_mapped, 17U);
}

TEST(TorchExpandableRules, TheBlockBeforeTheTailIsTakenLast) {
  // [10 free | 3 | 7 free, then unmapped]: a 5 MiB request fits both free blocks. By its own size
  // the 7 MiB block is the best fit, but PyTorch ranks it by what it could grow to, so the 10 MiB
  // block at offset 0 serves it. A request only the tail block fits still goes there.
  const ReplayPlan plan = plan_of(
      {alloc(1, 10 * MiB), alloc(2, 3 * MiB), release(1), alloc(3, 5 * MiB), alloc(4, 6 * MiB)});
  const auto r = bench::replay_torch_expandable(plan);
  EXPECT_EQ(r.offsets, (std::vector<std::uint64_t>{0, 10 * MiB, 0, 13 * MiB}));
  EXPECT_EQ(r.peak_reserved, 20 * MiB);
  bench::ExpandableRules by_own_size;
  by_own_size.tail_ranks_by_growth = false;
  const auto own = bench::replay_torch_expandable(plan, by_own_size);
  EXPECT_EQ(own.offsets, (std::vector<std::uint64_t>{0, 10 * MiB, 13 * MiB, 0}));
}

TEST(TorchExpandableRules, LowestAddressAmongEqualSizesAndAnyRemainderSplit) {
  // Five 4 MiB blocks fill the first page; two free 4 MiB blocks (offsets 0 and 8 MiB): 4 MiB goes
  // to the lower one. 3.5 MiB then takes the other and splits off 512 KiB: under expandable
  // segments PyTorch splits any remainder of 512 B or more, in the large pool too (the default
  // rules keep large remainders of 1 MiB or less in the block).
  const ReplayPlan plan = plan_of({alloc(1, 4 * MiB), alloc(2, 4 * MiB), alloc(3, 4 * MiB),
                                   alloc(4, 4 * MiB), alloc(5, 4 * MiB), release(1), release(3),
                                   alloc(6, 4 * MiB), alloc(7, 3 * MiB + 512 * KiB)});
  const auto r = bench::replay_torch_expandable(plan);
  EXPECT_EQ(r.offsets,
            (std::vector<std::uint64_t>{0, 4 * MiB, 8 * MiB, 12 * MiB, 16 * MiB, 0, 8 * MiB}));
  EXPECT_EQ(r.peak_allocated, 20 * MiB);
  EXPECT_EQ(r.reserved_series.back(), 20 * MiB);
  bench::TorchExpandableReplayer model;
  for (const ReplayOp& op : plan.ops) model.step(op);
  model.check_invariants();
  EXPECT_EQ(model.result().peak_allocated, 20 * MiB);
  // What is allocated at the end: 4 x 4 MiB + 3.5 MiB split, or the whole 4 MiB block unsplit.
  bench::ExpandableRules default_split;
  default_split.split_any_remainder = false;
  bench::TorchExpandableReplayer unsplit(default_split);
  for (const ReplayOp& op : plan.ops) unsplit.step(op);
  EXPECT_EQ(model.allocated_bytes(), 19 * MiB + 512 * KiB);
  EXPECT_EQ(unsplit.allocated_bytes(), 20 * MiB);
  // memscope's tie rule instead: the block freed last (offset 8 MiB) serves the 4 MiB request.
  bench::ExpandableRules recent;
  recent.tie = bench::TieBreak::most_recent;
  const auto lifo = bench::replay_torch_expandable(plan, recent);
  ASSERT_EQ(lifo.offsets.size(), 7U);
  EXPECT_EQ(lifo.offsets[5], 8 * MiB);
  EXPECT_EQ(lifo.offsets[6], 0U);
}

TEST(TorchExpandableRules, OneSegmentPerStreamAndPool) {
  const auto r =
      bench::replay_torch_expandable(plan_of({alloc_on(1, 3 * MiB, 0), alloc_on(2, 3 * MiB, 7),
                                              alloc_on(3, 4096, 7), alloc_on(4, 3 * MiB, 0)}));
  EXPECT_EQ(r.segments, 3U);
  EXPECT_EQ(r.offsets, (std::vector<std::uint64_t>{0, 0, 0, 3 * MiB}));
  EXPECT_EQ(r.peak_reserved, 42 * MiB);
}

// Random allocations and frees (fixed seed), the model's bookkeeping checked after every op, and
// what must hold whatever the rules: reserved never falls (nothing is unmapped), reserved is at
// least what is allocated, and growth happens only on a miss.
TEST(TorchExpandableRules, RandomSequenceKeepsItsBookkeeping) {
  std::mt19937_64 rng(12);
  std::vector<std::uint64_t> live;
  bench::TorchExpandableReplayer model;
  std::uint64_t next_id = 1;
  std::size_t allocs = 0;
  for (int i = 0; i < 4000; ++i) {
    const bool free_one = !live.empty() && (rng() % 100 < 45 || live.size() > 300);
    if (free_one) {
      const std::size_t at = rng() % live.size();
      model.step(release(live[at]));
      live[at] = live.back();
      live.pop_back();
    } else {
      // Log-uniform over 1 B .. 64 MiB, on two streams.
      const double exponent = std::uniform_real_distribution<double>(0.0, 26.0)(rng);
      const auto size = static_cast<std::size_t>(std::exp2(exponent));
      model.step(alloc_on(next_id, size, static_cast<StreamId>(rng() % 2)));
      live.push_back(next_id++);
      ++allocs;
    }
    ASSERT_NO_THROW(model.check_invariants()) << "after op " << i;
  }
  const auto& r = model.result();
  EXPECT_TRUE(std::is_sorted(r.reserved_series.begin(), r.reserved_series.end()));
  EXPECT_GE(r.peak_reserved, r.peak_allocated);
  EXPECT_EQ(r.cache_hits + r.map_calls, allocs);
  EXPECT_EQ(r.segments, 4U);  // two streams, two pools
}

// memscope's replay() on its own simulated device (the one that notes the peak's op) maps pages
// for expandable segments, counting them as reserved, as a replay through an allocator on a plain
// simulated device does. Random plan, fixed seed.
TEST(ReplayExpandable, TheReplaysDeviceMapsPagesAndFindsThePeak) {
  std::mt19937_64 rng(7);
  ReplayPlan plan;
  std::vector<std::uint64_t> live;
  for (std::uint64_t id = 1; id < 600; ++id) {
    if (!live.empty() && rng() % 100 < 45) {
      const std::size_t at = rng() % live.size();
      plan.ops.push_back(release(live[at]));
      live[at] = live.back();
      live.pop_back();
    } else {
      const double exponent = std::uniform_real_distribution<double>(0.0, 25.0)(rng);
      plan.ops.push_back(alloc(id, static_cast<std::size_t>(std::exp2(exponent))));
      live.push_back(id);
    }
  }
  for (const char* recycling : {"never", "always"}) {
    ReplayOptions options;
    options.capacity = 8 * GiB;
    options.config = AllocatorConfig::parse(
        std::string("expandable_segments:true,expandable_segments_recycling:") + recycling);
    const ReplayResult ours = replay(plan, options);
    CachingAllocator plain(std::make_shared<SimulatedBackend>(8 * GiB), options.config);
    const ReplayResult reference = replay(plan, plain, true);
    EXPECT_EQ(ours.peak_reserved, reference.peak_reserved) << recycling;
    EXPECT_EQ(ours.num_device_alloc, reference.num_device_alloc) << recycling;
    EXPECT_EQ(ours.num_device_free, reference.num_device_free) << recycling;
    EXPECT_GT(ours.num_device_alloc, 0) << recycling;
    EXPECT_EQ(ours.peak_reserved % static_cast<std::int64_t>(2 * MiB), 0) << recycling;
    // The peak's op, noted by the device without a series, is the one the series shows.
    ASSERT_TRUE(ours.peak.happened()) << recycling;
    EXPECT_EQ(ours.peak.op, reference.peak.op) << recycling;
  }
}

// memscope's expandable segments with recycling off place like PyTorch's (the model) at the same
// pages: reserved bytes agree after every op, on random plans (fixed seeds, two streams) and on
// the real trace. 2 MiB pages in both pools: memscope's default large-pool page.
std::vector<std::size_t> memscope_expandable_series(const ReplayPlan& plan, const char* page) {
  ReplayOptions options;
  options.config = AllocatorConfig::parse(
      std::string("expandable_segments:true,expandable_segments_recycling:never,"
                  "expandable_segments_page_size:") +
      page);
  options.record_series = true;
  std::vector<std::size_t> series;
  for (const ReplaySample& s : replay(plan, options).series) {
    series.push_back(static_cast<std::size_t>(s.reserved_bytes));
  }
  return series;
}

ReplayPlan random_plan(std::uint64_t seed, std::size_t ops) {
  std::mt19937_64 rng(seed);
  ReplayPlan plan;
  std::vector<std::pair<std::uint64_t, StreamId>> live;
  for (std::uint64_t id = 1; plan.ops.size() < ops; ++id) {
    if (!live.empty() && (rng() % 100 < 45 || live.size() > 200)) {
      const std::size_t at = rng() % live.size();
      plan.ops.push_back({true, live[at].first, 0, live[at].second});
      live[at] = live.back();
      live.pop_back();
    } else {
      const double exponent = std::uniform_real_distribution<double>(0.0, 26.0)(rng);
      const auto stream = static_cast<StreamId>(rng() % 2);
      plan.ops.push_back(alloc_on(id, static_cast<std::size_t>(std::exp2(exponent)), stream));
      live.emplace_back(id, stream);
    }
  }
  return plan;
}

TEST(TorchExpandableRules, MemscopePlacesLikeTheModelOnRandomPlans) {
  for (const std::uint64_t seed : {1U, 2U, 3U}) {
    const ReplayPlan plan = random_plan(seed, 3000);
    for (const std::size_t page_mib : {2U, 16U}) {
      bench::ExpandableRules rules;
      rules.large_page = page_mib * MiB;
      const auto model = bench::replay_torch_expandable(plan, rules);
      const auto ours = memscope_expandable_series(plan, page_mib == 2 ? "2MiB" : "16MiB");
      ASSERT_EQ(ours.size(), model.reserved_series.size());
      const auto diff = std::mismatch(ours.begin(), ours.end(), model.reserved_series.begin());
      EXPECT_TRUE(diff.first == ours.end())
          << "seed " << seed << ", " << page_mib << " MiB pages: first differ after op "
          << diff.first - ours.begin();
    }
  }
}

TEST(TorchExpandableRules, MemscopePlacesLikeTheModelOnTheRealTrace) {
  MEMSCOPE_TRACE_OR_SKIP(real, corpus::kSmallTrainStep);
  const ReplayPlan plan = build_replay_plan(read_torch_snapshot_file(real));
  bench::ExpandableRules rules;
  rules.large_page = 2 * MiB;
  const auto model = bench::replay_torch_expandable(plan, rules);
  EXPECT_EQ(model.peak_reserved, 13'925'089'280U);  // 1.0001
  EXPECT_EQ(memscope_expandable_series(plan, "2MiB"), model.reserved_series);
}

TEST(TorchExpandableRules, RealTraceGivesTheIssuesAnchor) {
  // Issue 12: PyTorch's expandable rules replayed from an empty cache on the repository's trace
  // give reserved / peak live 1.0013. This model reproduces it to the byte it reports.
  MEMSCOPE_TRACE_OR_SKIP(real, corpus::kSmallTrainStep);
  const ReplayPlan plan = build_replay_plan(read_torch_snapshot_file(real));
  bench::TorchExpandableReplayer model;
  for (const ReplayOp& op : plan.ops) model.step(op);
  ASSERT_NO_THROW(model.check_invariants());
  const auto& r = model.result();
  EXPECT_EQ(r.peak_requested, plan.peak_live);
  EXPECT_EQ(r.peak_reserved, 13'941'866'496U);
  EXPECT_NEAR(static_cast<double>(r.peak_reserved) / static_cast<double>(plan.peak_live), 1.0013,
              0.00005);
  EXPECT_EQ(r.segments, 2U);
  EXPECT_EQ(r.map_calls, 247U);
  EXPECT_EQ(r.pages_mapped, 672U);
}

}  // namespace
}  // namespace memscope

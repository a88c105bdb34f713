// Expandable segments whose free pages move (expandable_segments_recycling above_peak, always)
// reserve no more in later iterations of a training step than in the first: placement
// by address space (src/allocator/expandable_placement.cpp). Before it, best fit among the
// mapped cached blocks put the second iteration's blocks elsewhere than the first's, free space
// split into more pieces with partial pages at their ends, and the peak crept up: 1.0101 ->
// 1.0228 of the live peak over 10 iterations of the three-stream step of seed 1, 1.0019 ->
// 1.0068 on the compiled GPT-2 step. The synthetic steps need no corpus; the real traces are
// skipped, saying why, without it (trace_corpus.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "memscope/caching_allocator.hpp"
#include "memscope/config.hpp"
#include "memscope/replay.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/trace.hpp"
#include "memscope/units.hpp"
#include "multi_stream_plan.hpp"
#include "steady_state.hpp"
#include "steady_state_checks.hpp"
#include "test_scale.hpp"
#include "trace_corpus.hpp"

namespace memscope {
namespace {

// 10 iterations back to back; 2 in the sanitizer builds (test_scale.hpp).
int iterations() {
  return testing::scaled_iterations(10);
}
constexpr double kCreep = 0.0005;  // the goal: iteration 10 <= iteration 1 + 0.05%

std::string moving_pages(std::string_view policy) {
  return "expandable_segments:true,expandable_segments_recycling:" + std::string(policy);
}

// Peak reserved / peak live of each iteration of `plan` replayed back to back on one allocator,
// what an iteration left live freed before the next; validate() after every operation.
std::vector<double> validated_ratios(const ReplayPlan& plan, const std::string& config) {
  CachingAllocator allocator(std::make_shared<SimulatedBackend>(64 * GiB),
                             AllocatorConfig::parse(config));
  std::vector<double> ratios;
  for (int i = 0; i < iterations(); ++i) {
    allocator.reset_peak_stats();
    std::unordered_map<std::uint64_t, void*> live;
    for (const ReplayOp& op : plan.ops) {
      if (op.is_free) {
        allocator.deallocate(live.at(op.addr));
        live.erase(op.addr);
      } else {
        live[op.addr] = allocator.allocate(op.size, op.stream);
      }
      allocator.validate();
    }
    const auto peak = allocator.stats().reserved_bytes[0].peak;
    ratios.push_back(bench::reserved_ratio(static_cast<std::size_t>(peak), plan.peak_live));
    for (const auto& entry : live) allocator.deallocate(entry.second);
    allocator.validate();
  }
  return ratios;
}

void expect_no_creep(const std::vector<double>& ratios) {
  for (std::size_t i = 1; i < ratios.size(); ++i) {
    EXPECT_LE(ratios[i], ratios.front() + kCreep) << "iteration " << i + 1;
  }
}

ReplayPlan on_one_stream(ReplayPlan plan) {
  for (ReplayOp& op : plan.ops) op.stream = kDefaultStream;
  return plan;
}

TEST(ExpandableSteadyState, MovingPagesNeverCreepOnSyntheticSteps) {
  for (const char* policy : {"above_peak", "always"}) {
    for (const std::uint64_t seed : {1U, 2U, 3U, 4U, 5U, 6U}) {
      SCOPED_TRACE(std::string(policy) + ", seed " + std::to_string(seed));
      const ReplayPlan plan = bench::three_stream_training_step(seed);
      expect_no_creep(validated_ratios(plan, moving_pages(policy)));
      expect_no_creep(validated_ratios(on_one_stream(plan), moving_pages(policy)));
    }
  }
}

// The default policy (at_limit) moves no page while memory is not short: after a step's first
// iteration, not one page is mapped, moved or unmapped. above_peak keeps reserved nearer live
// by moving pages in every iteration, whose driver calls cost more than the memory is worth on
// a device with room to spare (docs/benchmarks.md): why it is not the default.
TEST(ExpandableSteadyState, TheDefaultMovesNoPageAfterTheFirstIteration) {
  for (const std::uint64_t seed : {1U, 2U, 3U, 4U, 5U, 6U}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const ReplayPlan plan = bench::three_stream_training_step(seed);
    for (const ReplayPlan& p : {plan, on_one_stream(plan)}) {
      EXPECT_EQ(bench::memscope_steady_state(p, "expandable_segments:true", 3).steady_page_maps,
                0.0);
    }
    EXPECT_GT(bench::memscope_steady_state(plan, moving_pages("above_peak"), 3).steady_page_maps,
              0.0);
  }
}

// Expandable segments with the default policy (at_limit) reserve no more than PyTorch's
// expandable rules in any of 10 iterations on any trace of the corpus. Before the lowest
// address among equal sizes, cs336-medium ctx128 reserved 1.0448 of its live peak against
// 1.0089 (now 1.0080).
TEST(ExpandableSteadyState, DefaultNeverAbovePyTorchsExpandableRulesOnTheCorpus) {
  const auto traces = testing::scaled_traces(corpus::all_traces(), corpus::kSmallTrainStep);
  if (traces.empty()) {
    GTEST_SKIP() << "no traces in " << corpus::traces_dir() << " (MEMSCOPE_TRACES)";
  }
  for (const auto& path : traces) {
    SCOPED_TRACE(path.filename().string());
    const TorchSnapshot snapshot = read_trace_file(path);
    testing::expect_expandable_at_or_below_pytorchs_expandable(
        build_replay_plan(snapshot, trace_devices(snapshot).at(0)));
  }
}

// The four real traces that crept (docs/benchmarks.md): gpt2-small compiled 1.0019 -> 1.0068,
// opt-125m 1.0017 -> 1.0053, xl bf16 1.0039 -> 1.0055, small nograd 1.0353 -> 1.0407.
void expect_real_trace_steady(std::string_view name, double bound) {
  MEMSCOPE_TRACE_OR_SKIP(path, name);
  const TorchSnapshot snapshot = read_trace_file(path);
  const ReplayPlan plan = build_replay_plan(snapshot, trace_devices(snapshot).at(0));
  for (const char* policy : {"above_peak", "always"}) {
    SCOPED_TRACE(policy);
    const bench::SteadyState s =
        bench::memscope_steady_state(plan, moving_pages(policy), iterations());
    expect_no_creep(s.ratios);
    EXPECT_LE(*std::max_element(s.ratios.begin(), s.ratios.end()), bound);
  }
}

TEST(ExpandableSteadyState, Gpt2CompiledNoCreep) {
  expect_real_trace_steady("torch_snapshot_gpt2-small_compiled_ctx64_bs1_train_step.pickle", 1.003);
}

TEST(ExpandableSteadyState, Opt125mNoCreep) {
  expect_real_trace_steady("torch_snapshot_opt-125m_zo-fedlearn_cold.pickle", 1.003);
}

TEST(ExpandableSteadyState, Cs336XlBf16NoCreep) {
  expect_real_trace_steady("torch_snapshot_cs336-xl_ctx256_bs4_fwd_bf16.pickle", 1.0045);
}

TEST(ExpandableSteadyState, Cs336SmallNogradNoCreep) {
  expect_real_trace_steady("torch_snapshot_cs336-small_ctx128_bs4_fwd_nograd_bf16.pickle", 1.031);
}

}  // namespace
}  // namespace memscope

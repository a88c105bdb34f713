// The goals of issue 25 on made-up steps drawn from seeds (random_step_plan.hpp), not only on the
// corpus: traces nobody has seen must meet them too. 10 iterations back to back, each replayed
// and called directly (steady_state_checks.hpp):
// - memscope's default rules at or below the model of PyTorch's (bench/torch_rules.hpp);
// - expandable segments with the default policy at or below the model of PyTorch's expandable
//   rules (bench/torch_expandable_rules.hpp);
// - no creep with the policies that move no page below the limit (iteration 10 within 0.0005 of
//   iteration 1), nor, replayed, with those that move pages;
// and at capacity, the smallest device memscope's default rules fit on at or below PyTorch's
// (bench/capacity_fit.hpp, 3 iterations).
// Two families: random_step() seeds 1-1000 and random_wide_step() seeds 1-300 (about 90 s in the
// Release build on 2 cores); MEMSCOPE_RANDOM_STEPS=N searches seeds 1..N of both instead, and
// the sanitizer builds search 100 of each over 2 iterations (test_scale.hpp). The seeds that once
// failed run in full at every scale. Before the front cache asked
// keeps_placement() on the slow path, random_step() seeds 229, 387 and 737 reserved more than
// PyTorch's rules when replayed (229: 1.5073 of the live peak against 1.4655), and seed 540 more
// than PyTorch's expandable rules; before a slow free flushed its stream's front cache, seeds
// 2319, 3544 and 3957 did when called directly, and seeds 1684 and 2252 with expandable
// segments (2252: 1.1842 against 1.0017).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "capacity_fit.hpp"
#include "memscope/replay.hpp"
#include "random_step_plan.hpp"
#include "steady_state.hpp"
#include "steady_state_checks.hpp"
#include "test_scale.hpp"

namespace memscope {
namespace {

using Family = ReplayPlan (*)(std::uint64_t);

struct Search {
  const char* name;
  Family family;
  std::uint64_t seeds;
};

std::vector<Search> searches(std::uint64_t step_seeds, std::uint64_t wide_seeds) {
  return {{"random_step", &testing::random_step, testing::scaled_seeds(step_seeds)},
          {"random_wide_step", &testing::random_wide_step, testing::scaled_seeds(wide_seeds)}};
}

// Iteration 10 within 0.0005 of iteration 1, replayed, with expandable segments and each policy.
void expect_no_creep_when_replayed(std::initializer_list<const char*> policies) {
  for (const char* policy : policies) {
    for (const Search& s : searches(1000, 300)) {
      for (std::uint64_t seed = 1; seed <= s.seeds; ++seed) {
        SCOPED_TRACE(std::string(policy) + ", " + s.name + " seed " + std::to_string(seed));
        const bench::SteadyState ours = bench::memscope_steady_state(
            s.family(seed),
            std::string("expandable_segments:true,expandable_segments_recycling:") + policy,
            testing::scaled_iterations(10));
        EXPECT_LE(ours.ratios.back(), ours.ratios.front() + 0.0005);
      }
    }
  }
}

TEST(RandomSteadyState, DefaultRulesNeverReserveMoreThanPyTorchs) {
  for (const Search& s : searches(1000, 300)) {
    for (std::uint64_t seed = 1; seed <= s.seeds; ++seed) {
      SCOPED_TRACE(std::string(s.name) + " seed " + std::to_string(seed));
      testing::expect_default_rules_at_or_below_pytorchs(s.family(seed));
    }
  }
}

TEST(RandomSteadyState, ExpandableNeverReservesMoreThanPyTorchsExpandableRules) {
  for (const Search& s : searches(1000, 300)) {
    for (std::uint64_t seed = 1; seed <= s.seeds; ++seed) {
      SCOPED_TRACE(std::string(s.name) + " seed " + std::to_string(seed));
      testing::expect_expandable_at_or_below_pytorchs_expandable(s.family(seed));
    }
  }
}

TEST(RandomSteadyState, TheStepsThatOnceReservedMoreNeverDo) {
  for (const std::uint64_t seed : {229U, 387U, 737U, 2319U, 3544U, 3957U}) {
    SCOPED_TRACE("random_step seed " + std::to_string(seed));
    testing::expect_default_rules_at_or_below_pytorchs(testing::random_step(seed));
  }
  for (const std::uint64_t seed : {540U, 1684U, 2252U}) {
    SCOPED_TRACE("random_step seed " + std::to_string(seed));
    testing::expect_expandable_at_or_below_pytorchs_expandable(testing::random_step(seed));
  }
}

TEST(RandomSteadyState, NoCreepWithoutPageMovesBelowTheLimit) {
  expect_no_creep_when_replayed({"never", "at_limit"});
}

// above_peak and always (pages that move) do not creep either when replayed, where every call
// takes the slow path and placement by address space decides every allocation. Called
// directly, 3 of the first 3,000 random_step() seeds still reserve more from the second
// iteration on (docs/benchmarks.md): the front cache's hot path files and takes back blocks by
// tests that see cached blocks, not unmapped ones.
TEST(RandomSteadyState, PagesThatMoveDoNotCreepWhenReplayed) {
  expect_no_creep_when_replayed({"above_peak", "always"});
}

// These crept before placement at the back of a run looked at its address space alone (882:
// 1.0068 -> 1.0674 with above_peak; 2041: 1.0504 -> 1.0685 with both), and must not again,
// replayed or called directly.
TEST(RandomSteadyState, PagesThatMoveNoLongerCreepOnTheStepsThatDid) {
  for (const char* policy : {"above_peak", "always"}) {
    for (const std::uint64_t seed : {32U, 153U, 209U, 882U, 2041U, 2745U}) {
      SCOPED_TRACE(std::string(policy) + ", random_step seed " + std::to_string(seed));
      const ReplayPlan plan = testing::random_step(seed);
      const std::string config =
          std::string("expandable_segments:true,expandable_segments_recycling:") + policy;
      for (const std::vector<double>& ratios :
           {bench::memscope_steady_state(plan, config, 10).ratios,
            bench::memscope_direct_ratios(plan, config, 10)}) {
        EXPECT_LE(ratios.back(), ratios.front() + 0.0005);
      }
    }
  }
}

TEST(RandomSteadyState, AtCapacityDefaultRulesFitWherePyTorchsDo) {
  for (const Search& s : searches(300, 100)) {
    for (std::uint64_t seed = 1; seed <= s.seeds; ++seed) {
      SCOPED_TRACE(std::string(s.name) + " seed " + std::to_string(seed));
      const bench::CapacityFit fit = bench::fit_both(s.family(seed), testing::scaled_iterations(3));
      ASSERT_NE(fit.torch, 0U);
      EXPECT_NE(fit.memscope, 0U);
      EXPECT_LE(fit.memscope, fit.torch);
    }
  }
}

}  // namespace
}  // namespace memscope

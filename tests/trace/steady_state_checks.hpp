// The steady-state checks the default-rules tests share (issue 25): `plan` replayed 10 iterations
// back to back through memscope's default rules and through the model of PyTorch's default
// rules (bench/steady_state.hpp), memscope's peak reserved / peak live at or below the model's
// in every iteration (to the table's 4 decimals). Test code only.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>

#include "memscope/replay.hpp"
#include "steady_state.hpp"
#include "torch_expandable_rules.hpp"
#include "torch_rules.hpp"

namespace memscope::testing {

inline void expect_default_rules_at_or_below_pytorchs(const ReplayPlan& plan) {
  constexpr int kIterations = 10;
  const bench::SteadyState ours = bench::memscope_steady_state(plan, "", kIterations);
  bench::TorchRulesReplayer torch(bench::TieBreak::lowest_address);
  const bench::SteadyState theirs = bench::model_steady_state(plan, torch, kIterations);
  ASSERT_EQ(ours.ratios.size(), theirs.ratios.size());
  for (std::size_t i = 0; i < ours.ratios.size(); ++i) {
    EXPECT_LE(ours.ratios[i], theirs.ratios[i] + 0.00005) << "iteration " << i + 1;
  }
}

// The same with expandable_segments:true (its default policy) against the model of PyTorch's
// expandable rules.
inline void expect_expandable_at_or_below_pytorchs_expandable(const ReplayPlan& plan) {
  constexpr int kIterations = 10;
  const bench::SteadyState ours =
      bench::memscope_steady_state(plan, "expandable_segments:true", kIterations);
  bench::TorchExpandableReplayer torch;
  const bench::SteadyState theirs = bench::model_steady_state(plan, torch, kIterations);
  ASSERT_EQ(ours.ratios.size(), theirs.ratios.size());
  for (std::size_t i = 0; i < ours.ratios.size(); ++i) {
    EXPECT_LE(ours.ratios[i], theirs.ratios[i] + 0.00005) << "iteration " << i + 1;
  }
}

}  // namespace memscope::testing

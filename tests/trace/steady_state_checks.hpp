// The steady-state checks the default-rules tests share (issue 25): `plan` run 10 iterations
// back to back through memscope and through a model of PyTorch's rules (bench/steady_state.hpp),
// memscope's peak reserved / peak live at or below the model's in every iteration (to the
// table's 4 decimals), both as replay() runs it (a peak window open: every call off the hot
// path) and as a program calls the allocator (the hot path taken where it may be); 2 iterations
// in the sanitizer builds (test_scale.hpp). Test code only.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "memscope/replay.hpp"
#include "steady_state.hpp"
#include "test_scale.hpp"
#include "torch_expandable_rules.hpp"
#include "torch_rules.hpp"

namespace memscope::testing {

inline void expect_at_or_below(const std::vector<double>& ours, const std::vector<double>& theirs,
                               const char* how) {
  ASSERT_EQ(ours.size(), theirs.size());
  for (std::size_t i = 0; i < ours.size(); ++i) {
    EXPECT_LE(ours[i], theirs[i] + 0.00005) << how << ", iteration " << i + 1;
  }
}

template <class Model>
void expect_memscope_at_or_below(const ReplayPlan& plan, const std::string& config, Model& model) {
  const int iterations = scaled_iterations(10);
  const std::vector<double> theirs = bench::model_steady_state(plan, model, iterations).ratios;
  expect_at_or_below(bench::memscope_steady_state(plan, config, iterations).ratios, theirs,
                     "replayed");
  expect_at_or_below(bench::memscope_direct_ratios(plan, config, iterations), theirs,
                     "called directly");
}

// memscope's default rules against the model of PyTorch's default rules.
inline void expect_default_rules_at_or_below_pytorchs(const ReplayPlan& plan) {
  bench::TorchRulesReplayer torch(bench::TieBreak::lowest_address);
  expect_memscope_at_or_below(plan, "", torch);
}

// expandable_segments:true (its default policy) against the model of PyTorch's expandable
// rules.
inline void expect_expandable_at_or_below_pytorchs_expandable(const ReplayPlan& plan) {
  bench::TorchExpandableReplayer torch;
  expect_memscope_at_or_below(plan, "expandable_segments:true", torch);
}

}  // namespace memscope::testing

// Would it fit, memscope against PyTorch's rules (at capacity): the smallest simulated
// device on which a plan replays N iterations back to back without running out of memory,
//   - for memscope: fit_capacity() (src/trace/replay_fit.cpp, what `memscope replay --fit` runs):
//     a CachingAllocator on a simulated device of that capacity, its default rules (or
//     `config`), which at the limit release cached segments and retry;
//   - for PyTorch's default rules: the model in torch_rules.hpp with TorchLimits{capacity},
//     which releases cached blocks and retries in PyTorch's order,
// both by the same bisection (fit_by_bisection()) over multiples of `grid` (2 MiB by default), up
// to the same largest capacity: four times the larger of their peaks reserved on an unlimited
// device. Neither allocator's behaviour is monotonic in capacity, so the answer is "fits here,
// not one grid step below", as fit_capacity() documents.
// fit_both_expandable(): the same with expandable segments on both sides.
// Bench and test code (memscope_corpus_bench --capacity, tests/trace/torch_rules_capacity_test,
// tests/trace/torch_expandable_capacity_test).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>

#include "memscope/config.hpp"
#include "memscope/replay.hpp"
#include "memscope/units.hpp"
#include "torch_expandable_capacity.hpp"
#include "torch_expandable_rules.hpp"
#include "torch_rules.hpp"

namespace memscope::bench {

struct CapacityFit {
  std::size_t memscope = 0;  // smallest capacity found; 0 when nothing up to the bound fits
  std::size_t torch = 0;
  std::size_t max_capacity = 0;
};

// Whether PyTorch's rules (the model) replay `plan` `iterations` times on `capacity` bytes.
[[nodiscard]] inline bool torch_rules_fit(const ReplayPlan& plan, std::size_t capacity,
                                          int iterations,
                                          std::size_t max_split_size = TorchLimits::kUnlimited) {
  TorchRulesReplayer model(TieBreak::lowest_address, {capacity, max_split_size});
  for (int i = 0; i < iterations; ++i) {
    if (model.run(plan).ooms != 0) return false;
    model.release_all();
  }
  return true;
}

namespace detail {
// memscope with `config` against a model of PyTorch's (`theirs_unlimited`: the model's peak
// reserved without a limit; `torch_fits(capacity)`: whether the model replays the plan on it), by
// the same bisection up to four times the larger unlimited peak. The bound: unlimited, neither
// releases anything, and later iterations reserve about what the first did (the steady-state
// figures); four times the larger peak leaves room for them.
template <class TorchFits>
[[nodiscard]] CapacityFit fit_against(const ReplayPlan& plan, int iterations,
                                      const std::string& config, std::size_t grid,
                                      std::size_t theirs_unlimited, TorchFits&& torch_fits) {
  ReplayOptions unlimited;
  unlimited.config = AllocatorConfig::parse(config);
  unlimited.capacity = std::size_t{1} << 60;
  const auto ours =
      static_cast<std::size_t>(std::max<std::int64_t>(replay(plan, unlimited).peak_reserved, 0));
  CapacityFit out;
  out.max_capacity = 4 * std::max(ours, theirs_unlimited);
  FitOptions o;
  o.config = unlimited.config;
  o.precision = grid;
  o.max_capacity = out.max_capacity;
  o.iterations = iterations;
  const FitResult m = fit_capacity(plan, o);
  out.memscope = m.fits ? m.capacity : 0;
  const FitResult t = fit_by_bisection(plan.peak_live, out.max_capacity, grid, torch_fits);
  out.torch = t.fits ? t.capacity : 0;
  return out;
}
}  // namespace detail

// memscope with `config` against PyTorch's default rules (the model, lowest-address ties).
[[nodiscard]] inline CapacityFit fit_both(const ReplayPlan& plan, int iterations,
                                          const std::string& config = "",
                                          std::size_t grid = 2 * MiB) {
  return detail::fit_against(plan, iterations, config, grid,
                             replay_torch_rules(plan, TieBreak::lowest_address).peak_reserved,
                             [&](std::size_t c) { return torch_rules_fit(plan, c, iterations); });
}

// The same with expandable segments on both sides: memscope with `config` (by default
// expandable_segments:true, its default page recycling) against PyTorch's expandable segments at
// capacity (torch_expandable_capacity.hpp).
[[nodiscard]] inline CapacityFit fit_both_expandable(
    const ReplayPlan& plan, int iterations, const std::string& config = "expandable_segments:true",
    std::size_t grid = 2 * MiB) {
  return detail::fit_against(
      plan, iterations, config, grid, replay_torch_expandable(plan).peak_reserved,
      [&](std::size_t c) { return torch_expandable_fit(plan, c, iterations); });
}

}  // namespace memscope::bench

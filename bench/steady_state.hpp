// A plan replayed N iterations back to back, each on the cache the earlier ones left (what a
// training loop running the same step sees): memscope through one CachingAllocator, PyTorch's
// rules through one model. Between iterations what a step left live is freed, and the next
// iteration's starting set allocates it again. Figures: peak reserved / peak live per iteration.
// Bench and test code (memscope_corpus_bench, the corpus tests). Not thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "memscope/caching_allocator.hpp"
#include "memscope/config.hpp"
#include "memscope/replay.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope::bench {

struct SteadyState {
  std::vector<double> ratios;  // peak reserved / peak live, per iteration
  double maps_per_1k = 0.0;    // map + unmap (or segment alloc + free) calls per 1,000 ops
};

[[nodiscard]] inline double reserved_ratio(std::size_t reserved, std::size_t live) {
  return live == 0 ? 0.0 : static_cast<double>(reserved) / static_cast<double>(live);
}

// memscope with `config` on a simulated device nothing runs out on.
[[nodiscard]] inline SteadyState memscope_steady_state(const ReplayPlan& plan,
                                                       const std::string& config, int iterations) {
  const std::size_t capacity = std::max<std::size_t>(64 * GiB, plan.peak_live * 4);
  CachingAllocator allocator(std::make_shared<SimulatedBackend>(capacity),
                             AllocatorConfig::parse(config));
  SteadyState s;
  std::int64_t calls = 0;
  for (int i = 0; i < iterations; ++i) {
    const ReplayResult r = replay(plan, allocator);
    s.ratios.push_back(reserved_ratio(static_cast<std::size_t>(r.peak_reserved), plan.peak_live));
    calls += r.num_device_alloc + r.num_device_free;
    for (void* p : r.live_pointers) allocator.deallocate(p);
  }
  s.maps_per_1k = 1000.0 * static_cast<double>(calls) /
                  static_cast<double>(plan.ops.size() * static_cast<std::size_t>(iterations));
  return s;
}

// A model of PyTorch's rules (TorchRulesReplayer, TorchExpandableReplayer): neither releases
// memory, so the peak of an iteration is what it holds at its end.
template <class Model>
[[nodiscard]] SteadyState model_steady_state(const ReplayPlan& plan, Model& model, int iterations) {
  SteadyState s;
  for (int i = 0; i < iterations; ++i) {
    (void)model.run(plan);
    s.ratios.push_back(reserved_ratio(model.reserved_bytes(), plan.peak_live));
    model.release_all();
  }
  return s;
}

}  // namespace memscope::bench

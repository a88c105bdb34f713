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
#include <unordered_map>
#include <vector>

#include "counting_backend.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/config.hpp"
#include "memscope/replay.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope::bench {

struct SteadyState {
  std::vector<double> ratios;  // peak reserved / peak live, per iteration
  double maps_per_1k = 0.0;    // map + unmap (or segment alloc + free) calls per 1,000 ops
  // memscope only, per iteration after the first (the first when there is only one), from the
  // CUDA driver calls CudaBackend would make (counting_backend.hpp): pages mapped (moves
  // included) plus pages unmapped, and what the calls would take on an H200 (an estimate).
  double steady_page_maps = 0.0;
  double steady_driver_ms = 0.0;
};

[[nodiscard]] inline double reserved_ratio(std::size_t reserved, std::size_t live) {
  return live == 0 ? 0.0 : static_cast<double>(reserved) / static_cast<double>(live);
}

// memscope with `config` on a simulated device nothing runs out on.
[[nodiscard]] inline SteadyState memscope_steady_state(const ReplayPlan& plan,
                                                       const std::string& config, int iterations) {
  const std::size_t capacity = std::max<std::size_t>(64 * GiB, plan.peak_live * 4);
  auto counting = std::make_shared<CountingBackend>(std::make_shared<SimulatedBackend>(capacity));
  CachingAllocator allocator(counting, AllocatorConfig::parse(config));
  SteadyState s;
  std::int64_t calls = 0;
  DriverCalls after_first;
  for (int i = 0; i < iterations; ++i) {
    const ReplayResult r = replay(plan, allocator);
    s.ratios.push_back(reserved_ratio(static_cast<std::size_t>(r.peak_reserved), plan.peak_live));
    calls += r.num_device_alloc + r.num_device_free;
    for (void* p : r.live_pointers) allocator.deallocate(p);
    if (i == 0 && iterations > 1) after_first = counting->calls();
  }
  s.maps_per_1k = 1000.0 * static_cast<double>(calls) /
                  static_cast<double>(plan.ops.size() * static_cast<std::size_t>(iterations));
  const DriverCalls steady = counting->calls().since(after_first);
  const auto per_iteration = static_cast<std::uint64_t>(std::max(iterations - 1, 1));
  s.steady_page_maps = static_cast<double>(steady.mappings_given_access + steady.mem_unmap) /
                       static_cast<double>(per_iteration);
  s.steady_driver_ms = h200_driver_us(steady) / 1000.0 / static_cast<double>(per_iteration);
  return s;
}

// Peak reserved / peak live per iteration, as memscope_steady_state() but by calling the
// allocator directly: replay() keeps a peak window open, which keeps every call off the hot
// path, while a program calls allocate() and deallocate() with none. The peak is current
// reserved read after every op (current_bytes(), which leaves the front caches alone).
[[nodiscard]] inline std::vector<double> memscope_direct_ratios(const ReplayPlan& plan,
                                                                const std::string& config,
                                                                int iterations) {
  const std::size_t capacity = std::max<std::size_t>(64 * GiB, plan.peak_live * 4);
  CachingAllocator allocator(std::make_shared<SimulatedBackend>(capacity),
                             AllocatorConfig::parse(config));
  std::vector<void*> pointers;
  std::vector<double> ratios;
  for (int i = 0; i < iterations; ++i) {
    pointers.assign(plan.ops.size(), nullptr);
    std::unordered_map<std::uint64_t, std::size_t> slot_of;  // recorded address -> op index
    std::int64_t peak = 0;
    for (std::size_t k = 0; k < plan.ops.size(); ++k) {
      const ReplayOp& op = plan.ops[k];
      if (op.is_free) {
        const auto it = slot_of.find(op.addr);
        allocator.deallocate(pointers[it->second]);
        pointers[it->second] = nullptr;
        slot_of.erase(it);
      } else {
        pointers[k] = allocator.allocate(op.size, op.stream);
        slot_of[op.addr] = k;
      }
      peak = std::max(peak, allocator.current_bytes().reserved);
    }
    ratios.push_back(reserved_ratio(static_cast<std::size_t>(peak), plan.peak_live));
    for (void* p : pointers) {
      if (p != nullptr) allocator.deallocate(p);
    }
  }
  return ratios;
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

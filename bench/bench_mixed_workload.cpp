// A replay-like mixed workload: 100,000 allocations and frees of varied sizes with a bounded
// live set, the same sequence for every allocator.
//
//   BM_MixedWorkload/<memscope-host|memscope-sim|glibc|jemalloc|mimalloc>
//
// The sequence (fixed seed) picks one of 256 slots per step: an empty slot gets an allocation,
// a full one is freed; about half the slots are live at a time. Sizes are 80 % small (512 B to
// 1 MiB), 18 % medium (1 to 10 MiB), 2 % large (10 to 256 MiB), log-uniform in each band,
// roughly the mix of a training step's activations. The sequence ends with every slot freed.
// Memory is never touched. memscope runs one untimed pass first, so its cache is warm, as it is
// from the second step of a training loop; items/s counts operations (allocations + frees).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bench_registry.hpp"
#include "bench_support.hpp"
#include "peers.hpp"

namespace memscope::bench {
namespace {

constexpr std::size_t kSlots = 256;
constexpr std::size_t kSteps = 100000;

struct Op {
  std::uint32_t slot;
  std::size_t size;  // 0: free the slot
};

std::size_t log_uniform(std::mt19937_64& rng, std::size_t lo, std::size_t hi) {
  std::uniform_real_distribution<double> e(std::log(static_cast<double>(lo)),
                                           std::log(static_cast<double>(hi)));
  return std::clamp(static_cast<std::size_t>(std::exp(e(rng))), lo, hi);
}

const std::vector<Op>& workload() {
  static const std::vector<Op> ops = [] {
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<std::uint32_t> pick_slot(0, kSlots - 1);
    std::uniform_real_distribution<double> band(0.0, 1.0);
    std::vector<bool> live(kSlots, false);
    std::vector<Op> v;
    for (std::size_t i = 0; i < kSteps; ++i) {
      const std::uint32_t slot = pick_slot(rng);
      std::size_t size = 0;
      if (!live[slot]) {
        const double b = band(rng);
        size = b < 0.80   ? log_uniform(rng, 512, 1 * MiB)
               : b < 0.98 ? log_uniform(rng, 1 * MiB, 10 * MiB)
                          : log_uniform(rng, 10 * MiB, 256 * MiB);
      }
      live[slot] = !live[slot];
      v.push_back({slot, size});
    }
    for (std::uint32_t s = 0; s < kSlots; ++s) {
      if (live[s]) v.push_back({s, 0});
    }
    return v;
  }();
  return ops;
}

template <class Allocate, class Deallocate>
void replay(const std::vector<Op>& ops, std::vector<void*>& slots, Allocate allocate,
            Deallocate deallocate) {
  for (const Op& op : ops) {
    void*& p = slots[op.slot];
    if (op.size != 0) {
      p = allocate(op.size);
      benchmark::DoNotOptimize(p);
    } else {
      deallocate(p);
      p = nullptr;
    }
  }
}

void mixed_memscope(benchmark::State& state, const std::string& spec) {
  const auto& ops = workload();
  std::vector<void*> slots(kSlots, nullptr);
  const auto allocator = make_allocator(spec);
  const auto allocate = [&](std::size_t n) { return allocator->allocate(n); };
  const auto deallocate = [&](void* p) { allocator->deallocate(p); };
  replay(ops, slots, allocate, deallocate);  // warm the cache
  const std::int64_t reserves_before = backend_reserves(*allocator);
  for (auto _ : state) replay(ops, slots, allocate, deallocate);
  const MemoryStats stats = allocator->stats();
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(ops.size()));
  state.counters["backend_reserves_per_pass"] =
      static_cast<double>(backend_reserves(*allocator) - reserves_before) /
      static_cast<double>(state.iterations());
  state.counters["peak_allocated_MiB"] =
      static_cast<double>(stats.allocated_bytes[0].peak) / static_cast<double>(MiB);
  state.counters["peak_reserved_MiB"] =
      static_cast<double>(stats.reserved_bytes[0].peak) / static_cast<double>(MiB);
}

void mixed_peer(benchmark::State& state, std::string_view peer_name) {
  std::string why;
  const auto peer = load_peer(peer_name, &why);
  if (!peer) {
    state.SkipWithError(why.c_str());
    return;
  }
  const auto& ops = workload();
  std::vector<void*> slots(kSlots, nullptr);
  for (auto _ : state) replay(ops, slots, peer->allocate, peer->deallocate);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(ops.size()));
}

}  // namespace

void register_mixed_workload_benchmarks(std::span<const std::string_view> peers,
                                        bool with_memscope) {
  for (const BackendUnderTest& backend : kBackends) {
    if (!with_memscope) break;
    const std::string spec = backend.spec;
    benchmark::RegisterBenchmark(
        ("BM_MixedWorkload/memscope-" + std::string(backend.label)).c_str(),
        [spec](benchmark::State& state) { mixed_memscope(state, spec); })
        ->Unit(benchmark::kMicrosecond);
  }
  for (const std::string_view peer : peers) {
    benchmark::RegisterBenchmark(("BM_MixedWorkload/" + std::string(peer)).c_str(),
                                 [peer](benchmark::State& state) { mixed_peer(state, peer); })
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace memscope::bench

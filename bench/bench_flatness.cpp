// Does a cache hit stay cheap as the cache fills? A cache-hit allocate+free pair with 10 to
// 100,000 other free blocks cached (CachedPopulation), on the simulated backend (a hit never
// calls the backend, so the host backend would give the same figures, but 100,000 cached
// blocks of up to 64 MiB would need terabytes of real memory).
//
//   BM_CacheHitPairAmongCached/sim/<bytes>/cached:<n>    varied sizes (the goal: flat)
//   BM_CacheHitPairSameClass/sim/3145728/cached:<n>      the adversarial case: every cached
//                                                        block in the request's size class,
//                                                        none of the request's exact size
//
// Request sizes for the varied case: 4 KiB (small pool: exact size classes), 3 MiB (large pool,
// carved from a 20 MiB segment) and 48 MiB (large pool, a segment of its own). Counters:
// cached_blocks (free blocks actually cached, from a snapshot), pair_block (the size of the
// block the pair reuses) and backend_reserves while timing (must be 0).
#include <benchmark/benchmark.h>

#include <array>
#include <string>

#include "bench_registry.hpp"
#include "bench_support.hpp"
#include "cached_population.hpp"

namespace memscope::bench {
namespace {

constexpr std::array<std::size_t, 3> kRequestSizes = {4 * KiB, 3 * MiB, 48 * MiB};
constexpr std::array<std::int64_t, 5> kCachedCounts = {10, 100, 1000, 10000, 100000};

enum class Shape { varied, just_above };

void cache_hit_pair_among_cached(benchmark::State& state, Shape shape, std::size_t size) {
  const auto count = static_cast<std::size_t>(state.range(0));
  const auto allocator = make_allocator("sim:16TiB");
  const CachedPopulation population = shape == Shape::varied
                                          ? CachedPopulation::varied(*allocator, count)
                                          : CachedPopulation::just_above(*allocator, count, size);
  void* warm = allocator->allocate(size);  // the pair's own block, cached from here on
  const std::size_t pair_block = allocator->lookup(warm).size;
  allocator->deallocate(warm);
  const std::int64_t cached = cached_blocks(*allocator);
  const std::int64_t reserves_before = backend_reserves(*allocator);
  for (auto _ : state) {
    void* p = allocator->allocate(size);
    benchmark::DoNotOptimize(p);
    allocator->deallocate(p);
  }
  state.counters["cached_blocks"] = static_cast<double>(cached);
  state.counters["pair_block"] = static_cast<double>(pair_block);
  state.counters["backend_reserves"] =
      static_cast<double>(backend_reserves(*allocator) - reserves_before);
}

void register_family(const std::string& name, Shape shape, std::size_t size) {
  auto* b = benchmark::RegisterBenchmark(
      (name + "/sim/" + std::to_string(size)).c_str(),
      [shape, size](benchmark::State& state) { cache_hit_pair_among_cached(state, shape, size); });
  b->ArgName("cached");
  for (const std::int64_t n : kCachedCounts) b->Arg(n);
}

}  // namespace

void register_flatness_benchmarks() {
  for (const std::size_t size : kRequestSizes) {
    register_family("BM_CacheHitPairAmongCached", Shape::varied, size);
  }
  register_family("BM_CacheHitPairSameClass", Shape::just_above, 3 * MiB);
}

}  // namespace memscope::bench

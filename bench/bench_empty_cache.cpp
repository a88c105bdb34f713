// empty_cache() with 10 to 10,000 cached segments.
//
//   BM_EmptyCache/<host|sim>/segments:<n>
//
// Every iteration fills a fresh cache with n whole 2 MiB segments (2n allocations of 1 MiB,
// two per small-pool segment, all freed) and times empty_cache() alone (manual time: the
// setup reserves and populates memory and costs far more than the call measured). On the host
// backend the time includes munmap of populated pages, which is what a user waits for; it stops
// at 1,000 segments (2 GiB) to stay within the machine. The simulated backend shows the
// allocator's own cost up to 10,000 segments.
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>
#include <vector>

#include "bench_registry.hpp"
#include "bench_support.hpp"

namespace memscope::bench {
namespace {

constexpr std::size_t kSegmentSize = 2 * MiB;

void empty_cache(benchmark::State& state, const std::string& spec) {
  const auto segments = static_cast<std::size_t>(state.range(0));
  std::vector<void*> blocks(2 * segments);
  double seconds = 0;
  for (auto _ : state) {
    const auto allocator = make_allocator(spec);
    for (void*& p : blocks) p = allocator->allocate(kSegmentSize / 2);
    for (void* p : blocks) allocator->deallocate(p);

    const auto start = std::chrono::steady_clock::now();
    const std::size_t released = allocator->empty_cache();
    const auto stop = std::chrono::steady_clock::now();

    const double elapsed = std::chrono::duration<double>(stop - start).count();
    state.SetIterationTime(elapsed);
    seconds += elapsed;
    if (released != segments * kSegmentSize) {
      state.SkipWithError("empty_cache() did not release every cached segment");
      break;
    }
  }
  if (state.iterations() > 0) {
    state.counters["ns_per_segment"] =
        seconds * 1e9 / static_cast<double>(state.iterations()) / static_cast<double>(segments);
  }
}

}  // namespace

void register_empty_cache_benchmarks() {
  auto* sim = benchmark::RegisterBenchmark(
      "BM_EmptyCache/sim", [](benchmark::State& state) { empty_cache(state, "sim:64GiB"); });
  sim->ArgName("segments")->UseManualTime()->Unit(benchmark::kMicrosecond);
  for (const std::int64_t n : {10, 100, 1000, 10000}) sim->Arg(n);

  auto* host = benchmark::RegisterBenchmark(
      "BM_EmptyCache/host", [](benchmark::State& state) { empty_cache(state, "host"); });
  host->ArgName("segments")->UseManualTime()->Unit(benchmark::kMicrosecond);
  for (const std::int64_t n : {10, 100, 1000}) host->Arg(n);
}

}  // namespace memscope::bench

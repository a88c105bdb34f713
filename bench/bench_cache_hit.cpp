// Cache-hit allocate+free pairs, one thread and two threads sharing one allocator, against
// glibc malloc, jemalloc and mimalloc on the same sizes.
//
//   BM_CacheHitPair/<host|sim>/<bytes>[/threads:2]   memscope CachingAllocator
//   BM_MallocFreePair/<peer>/<bytes>[/threads:2]     peer malloc/free
//
// The memory is never touched: the peers do not touch it either, and touching would measure
// page faults and memset rather than the allocator. Before timing, the memscope allocator is
// warmed with one block per thread, so every timed allocate() is a hit; the counter
// backend_reserves (segments reserved while timing) proves it and must read 0.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "bench_registry.hpp"
#include "bench_support.hpp"
#include "peers.hpp"

namespace memscope::bench {
namespace {

// One allocator shared by every thread of a run: thread 0 builds it before the timed loop and
// drops it after; the barriers Google Benchmark places at both ends of the loop order the rest.
struct SharedAllocator {
  std::unique_ptr<CachingAllocator> allocator;
  std::int64_t reserves_before = 0;
};

void warm(CachingAllocator& allocator, std::size_t size, int threads) {
  std::vector<void*> blocks;
  blocks.reserve(static_cast<std::size_t>(threads));
  for (int i = 0; i < threads; ++i) blocks.push_back(allocator.allocate(size));
  for (void* p : blocks) allocator.deallocate(p);
}

void cache_hit_pair(benchmark::State& state, const std::string& spec, std::size_t size,
                    SharedAllocator* shared) {
  if (state.thread_index() == 0) {
    shared->allocator = make_allocator(spec);
    warm(*shared->allocator, size, state.threads());
    shared->reserves_before = backend_reserves(*shared->allocator);
  }
  for (auto _ : state) {
    CachingAllocator& allocator = *shared->allocator;
    void* p = allocator.allocate(size);
    benchmark::DoNotOptimize(p);
    allocator.deallocate(p);
  }
  if (state.thread_index() == 0) {
    state.counters["backend_reserves"] =
        static_cast<double>(backend_reserves(*shared->allocator) - shared->reserves_before);
    shared->allocator.reset();
  }
}

void malloc_free_pair(benchmark::State& state, std::string_view peer_name, std::size_t size) {
  std::string why;
  const auto peer = load_peer(peer_name, &why);
  if (!peer) {
    state.SkipWithError(why.c_str());
    return;
  }
  for (auto _ : state) {
    void* p = peer->allocate(size);
    benchmark::DoNotOptimize(p);
    peer->deallocate(p);
  }
}

// Registers `fn` once single-threaded and once with two threads.
template <class Fn>
void register_one_and_two_threads(const std::string& name, Fn fn) {
  benchmark::RegisterBenchmark(name.c_str(), fn);
  benchmark::RegisterBenchmark(name.c_str(), fn)->Threads(2);
}

}  // namespace

void register_cache_hit_benchmarks(std::span<const std::string_view> peers, bool with_memscope) {
  for (const BackendUnderTest& backend : kBackends) {
    if (!with_memscope) break;
    for (const std::size_t size : kHitPairSizes) {
      const std::string spec = backend.spec;
      // Each registration owns its shared state; benchmarks live until the process exits.
      const auto shared = std::make_shared<SharedAllocator>();
      register_one_and_two_threads(
          "BM_CacheHitPair/" + std::string(backend.label) + "/" + std::to_string(size),
          [spec, size, shared](benchmark::State& state) {
            cache_hit_pair(state, spec, size, shared.get());
          });
    }
  }
  for (const std::string_view peer : peers) {
    for (const std::size_t size : kHitPairSizes) {
      register_one_and_two_threads(
          "BM_MallocFreePair/" + std::string(peer) + "/" + std::to_string(size),
          [peer, size](benchmark::State& state) { malloc_free_pair(state, peer, size); });
    }
  }
}

}  // namespace memscope::bench

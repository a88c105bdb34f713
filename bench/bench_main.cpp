// memscope_bench: the allocator benchmarks (docs/benchmarks.md lists them with results).
// An own main() instead of benchmark_main so the families can be registered with names built
// at run time, and the context printed with the results says what the peers were.
#include <benchmark/benchmark.h>

#include <array>
#include <string_view>

#include "bench_registry.hpp"

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("memscope.peers",
                              "glibc: process malloc; mimalloc: dlopen(RTLD_LOCAL); jemalloc: "
                              "memscope_bench_jemalloc");
  benchmark::AddCustomContext("memscope.memory_touched", "no (allocator cost only)");
  constexpr std::array<std::string_view, 2> peers = {"glibc", "mimalloc"};
  memscope::bench::register_cache_hit_benchmarks(peers, true);
  memscope::bench::register_flatness_benchmarks();
  memscope::bench::register_empty_cache_benchmarks();
  memscope::bench::register_mixed_workload_benchmarks(peers, true);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

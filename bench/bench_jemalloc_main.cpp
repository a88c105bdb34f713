// memscope_bench_jemalloc: the jemalloc peer figures, in a process whose malloc is jemalloc.
// Debian's jemalloc cannot be dlopen'ed beside glibc malloc (initial-exec TLS, see peers.hpp),
// so it gets its own binary, linked against libjemalloc, running the same families with the
// same names as memscope_bench: the two JSON files merge into one table.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdio>
#include <string_view>

#include "bench_registry.hpp"
#include "peers.hpp"

extern "C" int mallctl(const char* name, void* oldp, std::size_t* oldlenp, void* newp,
                       std::size_t newlen);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // Calling mallctl keeps the link to libjemalloc (and proves malloc is jemalloc's).
  const char* version = nullptr;
  std::size_t length = sizeof(version);
  if (mallctl("version", static_cast<void*>(&version), &length, nullptr, 0) != 0 ||
      !memscope::bench::jemalloc_is_process_malloc()) {
    std::fprintf(stderr, "memscope_bench_jemalloc: jemalloc is not the process malloc\n");
    return 1;
  }
  benchmark::AddCustomContext("memscope.peers", "jemalloc: process malloc (linked)");
  benchmark::AddCustomContext("jemalloc.version", version);
  benchmark::AddCustomContext("memscope.memory_touched", "no (allocator cost only)");
  constexpr std::array<std::string_view, 1> peers = {"jemalloc"};
  memscope::bench::register_cache_hit_benchmarks(peers, false);
  memscope::bench::register_mixed_workload_benchmarks(peers, false);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

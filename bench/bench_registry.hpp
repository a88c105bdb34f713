// The benchmark families. Each file registers its own family at run time (names are built from
// the sizes, backends and peers), and each binary's main() picks what it runs:
//   memscope_bench           memscope on every backend, glibc malloc and mimalloc
//   memscope_bench_jemalloc  jemalloc, linked as the process malloc (see peers.hpp for why)
#pragma once

#include <span>
#include <string_view>

namespace memscope::bench {

// `peers`: which of kPeerNames to run against; `with_memscope`: whether memscope runs too.
void register_cache_hit_benchmarks(std::span<const std::string_view> peers, bool with_memscope);
void register_mixed_workload_benchmarks(std::span<const std::string_view> peers,
                                        bool with_memscope);
void register_flatness_benchmarks();     // memscope only
void register_empty_cache_benchmarks();  // memscope only

}  // namespace memscope::bench

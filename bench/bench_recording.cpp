// memscope_bench_recording: what recording costs per event, against recording off in the same
// run. A plain program (no Google Benchmark): rounds of 4 KiB allocate+free cache hits on the
// host allocator, alternating the modes so that a busy machine slows all of them alike, best
// round of each kept. Each pair records three events (alloc, free_requested, free_completed);
// stacks are taken on the alloc only, so
//   ns per event (no stacks)  = (pair with events - pair off) / 3
//   ns per C++ stack          = pair with C++ stacks - pair with events
// C++ stacks are measured at two call depths: unwinding costs per frame.
//
//   build/bench/memscope_bench_recording [pairs per round, default 200000] [rounds, default 7]
//
// Python frames: bench/recording_python.py. Results: docs/benchmarks.md, "Recording".
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

#include "bench_support.hpp"
#include "memscope/recording.hpp"

namespace {

using memscope::CachingAllocator;

double cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Runs `pairs` allocate+free pairs `depth` calls below the caller; returns ns per pair.
[[gnu::noinline]] double pairs_at_depth(CachingAllocator& a, long pairs, int depth) {
  if (depth > 0) {
    const double ns = pairs_at_depth(a, pairs, depth - 1);
    asm volatile("" ::: "memory");  // not a tail call: each level is a real frame
    return ns;
  }
  const double start = cpu_seconds();
  for (long i = 0; i < pairs; ++i) {
    void* p = a.allocate(4096);
    asm volatile("" : : "r"(p) : "memory");
    a.deallocate(p);
  }
  return (cpu_seconds() - start) * 1e9 / static_cast<double>(pairs);
}

struct Mode {
  const char* name;
  bool record;
  bool cpp_stacks;
  int depth;
  double best = std::numeric_limits<double>::max();
};

}  // namespace

int main(int argc, char** argv) {
  const long pairs = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 200000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  const auto allocator = memscope::bench::make_allocator("host");
  std::vector<Mode> modes = {{"off", false, false, 0},
                             {"events", true, false, 0},
                             {"cpp stacks, ~7 frames", true, true, 0},
                             {"cpp stacks, ~37 frames", true, true, 30}};
  for (int r = 0; r < rounds; ++r) {
    for (Mode& m : modes) {
      if (m.record) {
        // The ring is full after the warm-up pairs, as in a long run: new events overwrite.
        allocator->start_recording({.max_entries = 100000, .cpp_stacks = m.cpp_stacks});
        (void)pairs_at_depth(*allocator, 40000, m.depth);
      } else {
        allocator->stop_recording();
        (void)pairs_at_depth(*allocator, 1000, m.depth);
      }
      m.best = std::min(m.best, pairs_at_depth(*allocator, pairs, m.depth));
    }
  }
  allocator->stop_recording();
  const double off = modes[0].best;
  const double events = modes[1].best;
  std::printf("4 KiB allocate+free pair, host allocator, best of %d rounds of %ld pairs (CPU):\n",
              rounds, pairs);
  for (const Mode& m : modes) {
    std::printf("  %-22s %7.1f ns per pair  (%.2fx off)\n", m.name, m.best, m.best / off);
  }
  std::printf("recording, no stacks:   %6.1f ns per event\n", (events - off) / 3.0);
  std::printf("C++ stack, ~7 frames:   %6.1f ns per alloc event (beyond the event itself)\n",
              modes[2].best - events);
  std::printf("C++ stack, ~37 frames:  %6.1f ns per alloc event (beyond the event itself)\n",
              modes[3].best - events);
  return 0;
}

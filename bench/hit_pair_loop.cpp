// memscope_hit_pair_loop: a bare loop of allocate+free pairs, for counting instructions with
// callgrind, which does not care how busy the machine is (timings on a shared machine do):
//
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null
//            build/bench/memscope_hit_pair_loop <allocator> <bytes> <pairs>
//
// <allocator> is memscope-host, memscope-sim, glibc, mimalloc or jemalloc (for jemalloc, run
// with LD_PRELOAD=libjemalloc.so.2 so that it is the process malloc); memscope-host-expandable
// and memscope-sim-expandable turn on expandable_segments, whose hit path must cost the same;
// memscope-sim-tight runs at capacity (a memory limit of 1.5 segments of the size, and a second
// segment refused once: from then on every call takes the slow path with no front cache, issue
// 25). Run
// it with two pair counts and divide the difference in instructions by the difference in pairs:
// start-up and warm-up cancel out. It also prints the loop's CPU time per pair; on a busy machine
// the best of several runs is the closest to the code's own cost. docs/benchmarks.md lists the
// results.
//
// Where the kernel exposes the CPU's instruction counter (perf_event_open; not in most VMs), the
// loop also prints "instructions: N (perf_event)", the user-space instructions of the timed loop
// alone, and bench/instructions_per_pair.py uses that instead of callgrind; otherwise it prints
// "instructions: unavailable (<why>)".
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "bench_support.hpp"
#include "instruction_counter.hpp"
#include "memscope/errors.hpp"
#include "peers.hpp"

namespace {

double cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

template <class Allocate, class Deallocate>
void run_pairs(std::size_t size, long pairs, Allocate allocate, Deallocate deallocate) {
  deallocate(allocate(size));  // warm: every timed pair below is a cache hit
  std::string why;
  auto counter = memscope::bench::InstructionCounter::open(&why);
  const double start = cpu_seconds();
  if (counter) counter->start();
  for (long i = 0; i < pairs; ++i) {
    void* p = allocate(size);
    asm volatile("" : : "r"(p) : "memory");  // keep the pair from being optimised away
    deallocate(p);
  }
  const std::uint64_t instructions = counter ? counter->stop() : 0;
  const double elapsed = cpu_seconds() - start;
  if (pairs > 0)
    std::printf("%.1f ns per pair (CPU)\n", elapsed * 1e9 / static_cast<double>(pairs));
  if (counter) {
    std::printf("instructions: %llu (perf_event)\n", static_cast<unsigned long long>(instructions));
  } else {
    std::printf("instructions: unavailable (%s)\n", why.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr,
                 "usage: %s <memscope-host|memscope-sim|memscope-host-expandable|"
                 "memscope-sim-expandable|memscope-sim-tight|glibc|mimalloc|jemalloc> <bytes> "
                 "<pairs>\n",
                 argv[0]);
    return 2;
  }
  const std::string_view name = argv[1];
  const std::size_t size = std::strtoull(argv[2], nullptr, 10);
  const long pairs = std::strtol(argv[3], nullptr, 10);
  if (name.starts_with("memscope-")) {
    // Near capacity: the segment of `size` (2 MiB up to 1 MiB, 20 MiB up to 10 MiB, else the size
    // in 2 MiB steps) is over half of a limit of 1.5 segments.
    const std::size_t segment =
        size <= (std::size_t{1} << 20) ? std::size_t{2} << 20
        : size < (std::size_t{10} << 20)
            ? std::size_t{20} << 20
            : (size + (std::size_t{2} << 20) - 1) / (std::size_t{2} << 20) * (std::size_t{2} << 20);
    const std::string config =
        name.ends_with("-expandable") ? "expandable_segments:true"
        : name.ends_with("-tight")
            ? "memory_limit:" + std::to_string((segment / 2 * 3) >> 20) + "MiB"
            : "";
    const auto allocator = memscope::bench::make_allocator(
        name.starts_with("memscope-host") ? "host" : "sim:64GiB", config);
    if (name.ends_with("-tight")) {
      // At the limit once: a second segment is refused, which is what turns the front cache off.
      void* first = allocator->allocate(size);
      try {
        allocator->deallocate(allocator->allocate(segment));
      } catch (const memscope::OutOfMemoryError&) {
      }
      allocator->deallocate(first);
    }
    run_pairs(
        size, pairs, [&](std::size_t n) { return allocator->allocate(n); },
        [&](void* p) { allocator->deallocate(p); });
    return 0;
  }
  std::string why;
  const auto peer = memscope::bench::load_peer(name, &why);
  if (!peer) {
    std::fprintf(stderr, "%s: %s\n", argv[1], why.c_str());
    return 1;
  }
  run_pairs(size, pairs, peer->allocate, peer->deallocate);
  return 0;
}

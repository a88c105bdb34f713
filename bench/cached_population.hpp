// CachedPopulation: fills an allocator's cache with many free blocks, so a benchmark can
// measure whether a cache hit stays as cheap when the cache is full.
//
// Freed neighbours inside a segment merge, so freeing a run of blocks would leave few cached
// blocks behind. Each block to be cached is therefore allocated with a live "pin" after it (a
// block of the smallest size of the same pool), and only the blocks are freed: the pins keep
// most of them apart. Merges still happen where best fit put a pin elsewhere, so the number
// actually cached is counted from a snapshot rather than assumed.
//
// Two shapes, both from a fixed seed and meant for the simulated backend (no memory behind it):
//   varied(n)             half small pool (512 B to 1 MiB), half large pool (1 MiB to 64 MiB),
//                         log-uniform in each: a cache after many different tensor shapes.
//   just_above(n, size)   every block 512 B to 127.5 KiB bigger than `size`, none equal to it:
//                         many near-identical shapes (e.g. variable sequence lengths), all in
//                         the size class of a `size` request. The adversarial case for a best
//                         fit that scans a size class.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <random>
#include <vector>

#include "memscope/caching_allocator.hpp"
#include "memscope/units.hpp"

namespace memscope::bench {

class CachedPopulation {
 public:
  static CachedPopulation varied(CachingAllocator& allocator, std::size_t count) {
    std::mt19937_64 rng(42);
    return CachedPopulation(allocator, count, [&rng](std::size_t i) {
      return i % 2 == 0 ? log_uniform(rng, 512, 1 * MiB) : log_uniform(rng, 1 * MiB + 1, 64 * MiB);
    });
  }

  static CachedPopulation just_above(CachingAllocator& allocator, std::size_t count,
                                     std::size_t size) {
    return CachedPopulation(allocator, count,
                            [size](std::size_t i) { return size + 512 * (1 + i % 255); });
  }

  // Not copyable or movable: the factories return prvalues, which C++17 never copies.
  CachedPopulation(const CachedPopulation&) = delete;
  CachedPopulation& operator=(const CachedPopulation&) = delete;
  ~CachedPopulation() {
    for (void* p : pins_) allocator_.deallocate(p);
  }

 private:
  CachedPopulation(CachingAllocator& allocator, std::size_t count,
                   const std::function<std::size_t(std::size_t)>& size_of)
      : allocator_(allocator) {
    std::vector<void*> to_free;
    to_free.reserve(count);
    pins_.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t size = size_of(i);
      to_free.push_back(allocator.allocate(size));
      pins_.push_back(allocator.allocate(size <= 1 * MiB ? 512 : 1 * MiB + 1));
    }
    for (void* p : to_free) allocator.deallocate(p);
  }

  static std::size_t log_uniform(std::mt19937_64& rng, std::size_t lo, std::size_t hi) {
    std::uniform_real_distribution<double> exponent(std::log(static_cast<double>(lo)),
                                                    std::log(static_cast<double>(hi)));
    // exp(log(lo)) may come out a hair below lo: clamp so a size never changes pool.
    return std::clamp(static_cast<std::size_t>(std::exp(exponent(rng))), lo, hi);
  }

  CachingAllocator& allocator_;
  std::vector<void*> pins_;
};

}  // namespace memscope::bench

// What every memscope benchmark shares: the sizes, how an allocator under test is built, and
// how its statistics are read back to prove a benchmark measured what its name says.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "memscope/backend.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/config.hpp"
#include "memscope/units.hpp"

namespace memscope::bench {

// 512 B ... 256 MiB: both pools, every segment kind (2 MiB small, 20 MiB shared large, own
// segment above 10 MiB), and sizes where glibc switches from its heap to one mmap per call.
inline constexpr std::array<std::size_t, 9> kHitPairSizes = {
    512, 4 * KiB, 64 * KiB, 1 * MiB, 2 * MiB, 16 * MiB, 32 * MiB, 64 * MiB, 256 * MiB};

// The backends the allocator is measured on, by their short name in benchmark names.
struct BackendUnderTest {
  const char* label;  // "host", "sim"
  const char* spec;   // what make_backend() takes
};
inline constexpr std::array<BackendUnderTest, 2> kBackends = {BackendUnderTest{"host", "host"},
                                                              BackendUnderTest{"sim", "sim:64GiB"}};

// Default settings, not MEMSCOPE_ALLOC_CONF: a stray environment must not change the figures.
inline std::unique_ptr<CachingAllocator> make_allocator(const std::string& spec,
                                                        const std::string& settings = "") {
  return std::make_unique<CachingAllocator>(std::shared_ptr<Backend>(make_backend(spec)),
                                            AllocatorConfig::parse(settings));
}

// Segments reserved from the backend so far: a benchmark of cache hits must not add any.
inline std::int64_t backend_reserves(const CachingAllocator& allocator) {
  return allocator.stats().num_device_alloc;
}

// Free blocks in the cache (inactive blocks, whole segments included), counted from a snapshot.
inline std::int64_t cached_blocks(const CachingAllocator& allocator) {
  std::int64_t n = 0;
  for (const auto& segment : allocator.snapshot().segments) {
    for (const auto& block : segment.blocks) n += block.state == BlockState::inactive ? 1 : 0;
  }
  return n;
}

}  // namespace memscope::bench

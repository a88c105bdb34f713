// Expandable segments with several threads at once on real host memory, each on its own stream,
// with pages recycled across streams (always): every thread's blocks keep what it wrote into
// them while other threads' misses move pages between ranges and empty_cache() unmaps them.
// Run under TSan in CI; here it checks contents and the books at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "expandable_checks.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/host_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

struct Mine {
  unsigned char* pointer;
  std::size_t size;
  unsigned char value;
};

// Writes the bytes intact() reads (a memset of every block would dominate the run under TSan).
void fill(const Mine& m) {
  for (std::size_t i = 0; i < m.size; i += 4096) {
    m.pointer[i] = m.value;
    m.pointer[std::min(i + 4095, m.size - 1)] = m.value;
  }
}

bool intact(const Mine& m) {
  // First and last byte of every 4 KiB page, where a page moved from under the block would show.
  for (std::size_t i = 0; i < m.size; i += 4096) {
    if (m.pointer[i] != m.value || m.pointer[std::min(i + 4095, m.size - 1)] != m.value) {
      return false;
    }
  }
  return true;
}

TEST(ExpandableThreads, FourThreadsOnOwnStreamsKeepTheirContentsWhilePagesAreRecycled) {
  CachingAllocator allocator(
      std::make_shared<HostBackend>(),
      AllocatorConfig::parse(
          "memory_limit:1GiB,expandable_segments:true,expandable_segments_recycling:always"));
  std::atomic<int> broken{0};
  std::atomic<std::int64_t> allocations{0};
  constexpr int kThreads = 4;
  std::vector<std::thread> workers;
  workers.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 41);
      const auto uniform = [&rng](std::size_t lo, std::size_t hi) {
        return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
      };
      const StreamId stream = static_cast<StreamId>(t) + 1;
      std::vector<Mine> mine;
      for (int step = 0; step < 1'000; ++step) {
        const std::size_t op = uniform(0, 99);
        if (op < 50 && mine.size() < 8) {
          const std::size_t size = uniform(0, 3) == 0 ? uniform(1, 1 * MiB) : uniform(1, 16 * MiB);
          void* p = nullptr;
          try {
            p = allocator.allocate(size, stream);
          } catch (const OutOfMemoryError&) {
            continue;  // four threads under one 1 GiB limit
          }
          const auto value = static_cast<unsigned char>(step | 1);
          mine.push_back({static_cast<unsigned char*>(p), size, value});
          fill(mine.back());
          allocations.fetch_add(1, std::memory_order_relaxed);
        } else if (op < 97 && !mine.empty()) {
          const std::size_t i = uniform(0, mine.size() - 1);
          if (!intact(mine[i])) broken.fetch_add(1, std::memory_order_relaxed);
          allocator.deallocate(mine[i].pointer);
          mine[i] = mine.back();
          mine.pop_back();
        } else if (op >= 97) {
          (void)allocator.empty_cache();
        }
      }
      for (const Mine& m : mine) {
        if (!intact(m)) broken.fetch_add(1, std::memory_order_relaxed);
        allocator.deallocate(m.pointer);
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(broken.load(), 0) << "blocks lost their contents while other threads ran";
  const MemoryStats s = allocator.stats();
  EXPECT_EQ(s.allocation[0].current, 0);
  EXPECT_EQ(s.allocation[0].allocated, allocations.load());
  EXPECT_GT(s.num_device_free, 0);
  EXPECT_TRUE(testing::expandable_consistent(allocator));
  (void)allocator.empty_cache();
  EXPECT_EQ(allocator.stats().reserved_bytes[0].current, 0);
}

}  // namespace
}  // namespace memscope

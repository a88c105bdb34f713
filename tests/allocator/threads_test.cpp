// Several threads allocating, freeing, recording streams and reading statistics at once on one
// allocator. Run under TSan in CI; here it checks that the books still balance at the end.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "allocator_invariants.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/host_backend.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

void hammer(CachingAllocator& allocator, int threads, int steps, std::size_t max_size) {
  std::atomic<std::int64_t> allocated_total{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 1);
      std::vector<void*> mine;
      const StreamId stream = static_cast<StreamId>(t % 2);
      for (int i = 0; i < steps; ++i) {
        const int op = std::uniform_int_distribution<int>(0, 99)(rng);
        if (op < 50 || mine.empty()) {
          const auto size = std::uniform_int_distribution<std::size_t>(1, max_size)(rng);
          mine.push_back(allocator.allocate(size, stream));
          allocated_total.fetch_add(1, std::memory_order_relaxed);
        } else if (op < 95) {
          allocator.deallocate(mine.back());
          mine.pop_back();
        } else if (op < 97) {
          allocator.record_stream(mine.back(), 5);
        } else if (op < 98) {
          (void)allocator.empty_cache();
        } else {
          const MemoryStats s = allocator.stats();
          EXPECT_LE(s.allocated_bytes[0].current, s.allocated_bytes[0].peak);
          PeakScope scope = allocator.peak_scope();
          EXPECT_GE(scope.peak().allocated_bytes, 0);
        }
      }
      for (void* p : mine) allocator.deallocate(p);
    });
  }
  for (auto& w : workers) w.join();
  const MemoryStats s = allocator.stats();
  EXPECT_EQ(s.allocation[0].current, 0);
  EXPECT_EQ(s.allocated_bytes[0].current, 0);
  EXPECT_EQ(s.allocation[0].allocated, allocated_total.load());
  EXPECT_EQ(s.num_invalid_frees, 0);
  EXPECT_TRUE(testing::allocator_consistent(allocator));
}

TEST(Threads, FourThreadsOnTheSimulatedDevice) {
  CachingAllocator allocator(std::make_shared<SimulatedBackend>(256 * GiB), AllocatorConfig{});
  hammer(allocator, 4, 20'000, 64 * MiB);
}

TEST(Threads, FourThreadsOnRealHostMemory) {
  CachingAllocator allocator(std::make_shared<HostBackend>(), AllocatorConfig{});
  hammer(allocator, 4, 5'000, 256 * KiB);
  EXPECT_GT(allocator.empty_cache(), 0U);
}

}  // namespace
}  // namespace memscope

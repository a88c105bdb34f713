// Threads on one allocator, in rounds: a seeded random sequence per thread (several threads,
// several streams, sizes across both pools, hit pairs that go through the front cache), and
// between rounds a quiescent point where the snapshot's statistics must equal the live ones and
// the totals must be exactly what the threads did. Also: threads that exit leaving blocks in
// the front cache, and empty_cache() from one thread while others allocate. Run under TSan in
// CI (the `tsan` preset runs every test).
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cstdint>
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

constexpr std::size_t kAll = 0;

// What one thread did, in the allocator's own rounded sizes (lookup() tells them).
struct Ledger {
  std::vector<void*> live;
  std::int64_t live_bytes = 0;
  std::int64_t allocations = 0;
};

void random_steps(CachingAllocator& allocator, std::mt19937_64& rng, Ledger& ledger, int steps,
                  StreamId stream, std::size_t max_size) {
  std::uniform_int_distribution<int> op(0, 99);
  std::uniform_int_distribution<std::size_t> size(1, max_size);
  const auto allocate = [&](std::size_t bytes) {
    void* p = allocator.allocate(bytes, stream);
    ledger.live.push_back(p);
    ledger.live_bytes += static_cast<std::int64_t>(allocator.lookup(p).size);
    ++ledger.allocations;
  };
  const auto free_last = [&] {
    void* p = ledger.live.back();
    ledger.live_bytes -= static_cast<std::int64_t>(allocator.lookup(p).size);
    allocator.deallocate(p);
    ledger.live.pop_back();
  };
  for (int i = 0; i < steps; ++i) {
    const int o = op(rng);
    if (o < 40 || ledger.live.empty()) {
      allocate(size(rng));
    } else if (o < 75) {
      free_last();
    } else if (o < 95) {
      // A hit pair: free, then the same size again (the front cache's case).
      const std::size_t bytes = allocator.lookup(ledger.live.back()).requested_size;
      free_last();
      allocate(bytes);
    } else {
      // A free from the middle, so front-cached blocks sit between live ones.
      const std::size_t i_mid = ledger.live.size() / 2;
      std::swap(ledger.live[i_mid], ledger.live.back());
      free_last();
    }
  }
}

void run_rounds(CachingAllocator& allocator, int threads, int rounds, int steps,
                std::size_t max_size) {
  std::vector<Ledger> ledgers(static_cast<std::size_t>(threads));
  std::barrier sync(threads + 1);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(0x5EED0000U + static_cast<std::uint64_t>(t));
      // Threads 0 and 1 share stream 0; the others have their own.
      const auto stream = static_cast<StreamId>(t < 2 ? 0 : t);
      Ledger& ledger = ledgers[static_cast<std::size_t>(t)];
      for (int r = 0; r < rounds; ++r) {
        random_steps(allocator, rng, ledger, steps, stream, max_size);
        sync.arrive_and_wait();  // quiescent: the main thread checks
        sync.arrive_and_wait();  // checked
      }
      // Exits with its blocks freed: they stay in the front cache, owned by the allocator.
      while (!ledger.live.empty()) {
        allocator.deallocate(ledger.live.back());
        ledger.live.pop_back();
      }
      ledger.live_bytes = 0;
    });
  }
  for (int r = 0; r < rounds; ++r) {
    sync.arrive_and_wait();
    std::int64_t live_bytes = 0;
    std::int64_t live_count = 0;
    std::int64_t allocations = 0;
    for (const Ledger& l : ledgers) {
      live_bytes += l.live_bytes;
      live_count += static_cast<std::int64_t>(l.live.size());
      allocations += l.allocations;
    }
    const MemoryStats s = allocator.stats();
    EXPECT_EQ(s.allocated_bytes[kAll].current, live_bytes) << "round " << r;
    EXPECT_EQ(s.allocation[kAll].current, live_count) << "round " << r;
    EXPECT_EQ(s.allocation[kAll].allocated, allocations) << "round " << r;
    EXPECT_TRUE(testing::allocator_consistent(allocator)) << "round " << r;
    sync.arrive_and_wait();
  }
  for (auto& w : workers) w.join();
  const MemoryStats s = allocator.stats();
  EXPECT_EQ(s.allocation[kAll].current, 0);
  EXPECT_EQ(s.allocated_bytes[kAll].current, 0);
  EXPECT_EQ(s.active_bytes[kAll].current, 0);
  EXPECT_EQ(s.requested_bytes[kAll].current, 0);
  EXPECT_EQ(s.num_invalid_frees, 0);
  EXPECT_TRUE(testing::allocator_consistent(allocator));
  // Everything the exited threads left cached, front cache included, goes back.
  EXPECT_EQ(allocator.empty_cache(), static_cast<std::size_t>(s.reserved_bytes[kAll].current));
  EXPECT_EQ(allocator.stats().reserved_bytes[kAll].current, 0);
}

TEST(ThreadsRandom, FourThreadsThreeStreamsOnTheSimulatedDevice) {
  CachingAllocator allocator(std::make_shared<SimulatedBackend>(256 * GiB), AllocatorConfig{});
  run_rounds(allocator, 4, 8, 2'000, 48 * MiB);
}

TEST(ThreadsRandom, ThreeThreadsOnRealHostMemory) {
  CachingAllocator allocator(std::make_shared<HostBackend>(), AllocatorConfig{});
  run_rounds(allocator, 3, 6, 1'000, 4 * MiB);
}

TEST(ThreadsRandom, BlocksAThreadLeftInTheFrontCacheServeAnotherThread) {
  CachingAllocator allocator(std::make_shared<SimulatedBackend>(4 * GiB), AllocatorConfig{});
  void* left = nullptr;
  std::thread([&] {
    left = allocator.allocate(3 * MiB);
    allocator.deallocate(left);  // the thread ends with the block in the front cache
  }).join();
  void* again = allocator.allocate(3 * MiB);  // same size, same stream, another thread
  EXPECT_EQ(again, left);
  EXPECT_EQ(allocator.stats().segment[kAll].allocated, 1);
  allocator.deallocate(again);
  EXPECT_TRUE(testing::allocator_consistent(allocator));
}

TEST(ThreadsRandom, EmptyCacheFromOneThreadWhileOthersAllocate) {
  CachingAllocator allocator(std::make_shared<HostBackend>(), AllocatorConfig{});
  std::atomic<bool> stop{false};
  std::atomic<int> batches{0};  // progress of the workers, so the empties overlap their work
  std::vector<std::thread> workers;
  for (int t = 0; t < 2; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 7);
      Ledger ledger;
      while (!stop.load(std::memory_order_relaxed)) {
        random_steps(allocator, rng, ledger, 200, static_cast<StreamId>(t), 2 * MiB);
        batches.fetch_add(1, std::memory_order_relaxed);
      }
      for (void* p : ledger.live) allocator.deallocate(p);
    });
  }
  std::size_t released = 0;
  int empties = 0;
  while (empties < 200 || batches.load(std::memory_order_relaxed) < 40) {
    released += allocator.empty_cache();
    ++empties;
    if (empties % 16 == 0) std::this_thread::yield();
  }
  stop.store(true);
  for (auto& w : workers) w.join();
  released += allocator.empty_cache();
  EXPECT_GT(released, 0U);
  const MemoryStats s = allocator.stats();
  EXPECT_EQ(s.reserved_bytes[kAll].current, 0);
  EXPECT_EQ(s.allocated_bytes[kAll].current, 0);
  EXPECT_TRUE(testing::allocator_consistent(allocator));
}

}  // namespace
}  // namespace memscope

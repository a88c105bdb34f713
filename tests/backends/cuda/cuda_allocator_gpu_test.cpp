// The caching allocator on real device memory: statistics rebuilt from snapshots match the live
// ones through a random sequence; cross-stream reuse waits for the other stream's work; out of
// memory leaves the allocator and its allocations intact. Skipped where no GPU can be used.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "allocator_invariants.hpp"
#include "gpu_support.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/cuda_backend.hpp"
#include "memscope/errors.hpp"
#include "memscope/snapshot.hpp"
#include "memscope/units.hpp"

namespace {

using memscope::CachingAllocator;
using memscope::CudaBackend;
using memscope::GiB;
using memscope::MiB;
using memscope::StreamId;
using namespace std::chrono_literals;

// Every "current" statistic, per pool, rebuilt from a snapshot equals the live one, and the
// blocks tile their segments (the shared invariants of tests/support/allocator_invariants.hpp).
void expect_stats_match_snapshot(const CachingAllocator& allocator, const std::string& where) {
  EXPECT_TRUE(memscope::testing::allocator_consistent(allocator)) << where;
}

std::int64_t reserved(const CachingAllocator& allocator) {
  return allocator.stats().reserved_bytes[0].current;
}

TEST(CudaAllocatorGpu, RandomSequenceKeepsSnapshotAndStatsInAgreement) {
  MEMSCOPE_REQUIRE_GPU();
  auto backend = std::make_shared<CudaBackend>(0);
  memscope::testing::GpuWork work(*backend);
  CachingAllocator allocator(backend, memscope::AllocatorConfig{});
  const std::vector<StreamId> streams = {memscope::kDefaultStream, work.new_stream(),
                                         work.new_stream()};
  const unsigned seed = 20240607;
  RecordProperty("seed", static_cast<int>(seed));
  std::mt19937_64 rng(seed);
  const auto pick = [&rng](std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
  };
  struct Live {
    void* pointer;
    std::size_t size;
    StreamId stream;
  };
  std::vector<Live> live;
  std::size_t live_bytes = 0;
  constexpr std::size_t kLiveBudget = 4 * GiB;  // small next to any data-center GPU
  for (int step = 0; step < 1500; ++step) {
    const std::size_t action = pick(0, 99);
    if (action < 55 || live.empty()) {
      const std::size_t kind = pick(0, 9);
      const std::size_t size = kind < 6   ? pick(1, 1 * MiB)                // small pool
                               : kind < 9 ? pick(1 * MiB + 1, 10 * MiB)     // 20 MiB segments
                                          : pick(10 * MiB + 1, 300 * MiB);  // own segments
      if (live_bytes + size > kLiveBudget) continue;
      const StreamId stream = streams[pick(0, streams.size() - 1)];
      void* p = allocator.allocate(size, stream);
      ASSERT_NE(p, nullptr);
      work.fill(p, static_cast<unsigned char>(step), size, stream);  // the memory is real
      live.push_back({p, size, stream});
      live_bytes += size;
    } else if (action < 95) {
      const std::size_t i = pick(0, live.size() - 1);
      if (pick(0, 3) == 0) {
        // Used on another stream too: reuse must wait for that stream.
        const StreamId other = streams[pick(0, streams.size() - 1)];
        work.fill(live[i].pointer, 0, live[i].size, other);
        allocator.record_stream(live[i].pointer, other);
      }
      allocator.deallocate(live[i].pointer);
      live_bytes -= live[i].size;
      live[i] = live.back();
      live.pop_back();
    } else {
      (void)allocator.empty_cache();
    }
    expect_stats_match_snapshot(allocator, "after step " + std::to_string(step));
    if (HasFailure()) return;  // one report is enough; the rest would repeat it
  }
  for (const Live& l : live) allocator.deallocate(l.pointer);
  (void)allocator.empty_cache();
  expect_stats_match_snapshot(allocator, "at the end");
  EXPECT_EQ(reserved(allocator), 0);
}

TEST(CudaAllocatorGpu, CrossStreamReuseWaitsForTheOtherStream) {
  MEMSCOPE_REQUIRE_GPU();
  auto backend = std::make_shared<CudaBackend>(0);
  memscope::testing::GpuWork work(*backend);
  CachingAllocator allocator(backend, memscope::AllocatorConfig{});
  const StreamId producer = work.new_stream();
  const StreamId consumer = work.new_stream();

  void* p = allocator.allocate(8 * MiB, producer);
  work.spin(consumer, 1000ms);            // the consumer is busy for a second...
  work.fill(p, 0xab, 8 * MiB, consumer);  // ...and then writes p
  allocator.record_stream(p, consumer);
  allocator.deallocate(p);

  void* q = allocator.allocate(8 * MiB, producer);
  ASSERT_TRUE(work.busy(consumer)) << "the spin kernel ended early; the check below is moot";
  EXPECT_NE(q, p) << "p was handed out again while the consumer stream still had work on it";
  bool pending_seen = false;
  for (const auto& segment : allocator.snapshot().segments) {
    for (const auto& block : segment.blocks) {
      if (block.address == reinterpret_cast<std::uintptr_t>(p)) {
        pending_seen = block.state == memscope::BlockState::active_pending_free;
      }
    }
  }
  EXPECT_TRUE(pending_seen) << "p should be active_pending_free while the consumer runs";
  expect_stats_match_snapshot(allocator, "while pending");

  work.synchronize(consumer);
  void* r = allocator.allocate(8 * MiB, producer);
  EXPECT_EQ(r, p) << "after the consumer finished, the best fit is p again";
  expect_stats_match_snapshot(allocator, "after reuse");
  allocator.deallocate(q);
  allocator.deallocate(r);
}

TEST(CudaAllocatorGpu, EmptyCacheWaitsForPendingStreamWork) {
  MEMSCOPE_REQUIRE_GPU();
  auto backend = std::make_shared<CudaBackend>(0);
  memscope::testing::GpuWork work(*backend);
  CachingAllocator allocator(backend, memscope::AllocatorConfig{});
  const StreamId stream = work.new_stream();
  void* p = allocator.allocate(32 * MiB);
  work.spin(stream, 500ms);
  work.fill(p, 1, 32 * MiB, stream);
  allocator.record_stream(p, stream);
  allocator.deallocate(p);
  ASSERT_TRUE(work.busy(stream));
  const std::size_t released = allocator.empty_cache();
  EXPECT_FALSE(work.busy(stream)) << "empty_cache released memory the stream was still using";
  EXPECT_EQ(released, 32 * MiB);
  EXPECT_EQ(reserved(allocator), 0);
}

TEST(CudaAllocatorGpu, OutOfMemoryLeavesTheAllocatorAndItsMemoryIntact) {
  MEMSCOPE_REQUIRE_GPU();
  auto backend = std::make_shared<CudaBackend>(0);
  memscope::testing::GpuWork work(*backend);
  CachingAllocator allocator(backend, memscope::AllocatorConfig{});
  void* keep = allocator.allocate(64 * MiB);
  work.fill(keep, 0x7e, 64 * MiB, memscope::kDefaultStream);

  const std::size_t too_much = backend->capacity() + 1 * GiB;
  try {
    (void)allocator.allocate(too_much);
    FAIL() << "allocating more than the device has succeeded";
  } catch (const memscope::OutOfMemoryError& error) {
    EXPECT_EQ(error.figures().requested, too_much);
    EXPECT_EQ(error.figures().capacity, backend->capacity());
    EXPECT_NE(std::string(error.what()).find("cuda:0"), std::string::npos) << error.what();
  }
  EXPECT_EQ(allocator.stats().num_ooms, 1);
  expect_stats_match_snapshot(allocator, "after the OOM");

  void* more = allocator.allocate(64 * MiB);
  ASSERT_NE(more, nullptr);
  const auto bytes = work.read(keep, 64 * MiB);
  std::size_t wrong = 0;
  for (const unsigned char b : bytes) wrong += b != 0x7e ? 1 : 0;
  EXPECT_EQ(wrong, 0U) << "the allocation made before the OOM lost its contents";
  allocator.deallocate(more);
  allocator.deallocate(keep);
  expect_stats_match_snapshot(allocator, "at the end");
}

}  // namespace

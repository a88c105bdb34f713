// The caching allocator on real host memory: what the kernel reports (/proc/self/statm) must
// follow what the allocator says it reserved and released.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>

#include "memscope/caching_allocator.hpp"
#include "memscope/host_backend.hpp"
#include "memscope/units.hpp"
#include "sanitizers.hpp"

namespace memscope {
namespace {

// Resident set size from the kernel's own accounting.
std::int64_t rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "re");
  if (f == nullptr) return -1;
  long pages = 0;
  long resident = 0;
  const int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? resident * sysconf(_SC_PAGESIZE) : -1;
}

constexpr std::int64_t kTolerance = 1 * MiB;

TEST(HostMemory, EmptyCacheMakesRssFallByTheReleasedBytes) {
  if (testing::kThreadSanitizer) GTEST_SKIP() << testing::kRssUnderTsan;
  CachingAllocator allocator(std::make_shared<HostBackend>(), AllocatorConfig{});
  void* big = allocator.allocate(256 * MiB);
  std::memset(big, 1, 256 * MiB);
  void* small = allocator.allocate(3 * 512 * 512 * 4);
  allocator.deallocate(big);
  const std::int64_t before = rss_bytes();
  const std::size_t released = allocator.empty_cache();
  const std::int64_t after = rss_bytes();
  EXPECT_EQ(released, 256 * MiB);
  EXPECT_NEAR(static_cast<double>(before - after), static_cast<double>(released), kTolerance);
  allocator.deallocate(small);
}

TEST(HostMemory, ReservedBytesAreResidentAtOnce) {
  if (testing::kThreadSanitizer) GTEST_SKIP() << testing::kRssUnderTsan;
  CachingAllocator allocator(std::make_shared<HostBackend>(), AllocatorConfig{});
  const std::int64_t before = rss_bytes();
  void* p = allocator.allocate(128 * MiB);  // never touched by us
  const std::int64_t after = rss_bytes();
  EXPECT_NEAR(static_cast<double>(after - before), static_cast<double>(128 * MiB), kTolerance);
  allocator.deallocate(p);
  (void)allocator.empty_cache();
  EXPECT_NEAR(static_cast<double>(rss_bytes()), static_cast<double>(before), kTolerance);
}

TEST(HostMemory, CachedMemoryStaysResidentUntilEmptyCache) {
  if (testing::kThreadSanitizer) GTEST_SKIP() << testing::kRssUnderTsan;
  CachingAllocator allocator(std::make_shared<HostBackend>(), AllocatorConfig{});
  void* p = allocator.allocate(64 * MiB);
  const std::int64_t held = rss_bytes();
  allocator.deallocate(p);
  EXPECT_NEAR(static_cast<double>(rss_bytes()), static_cast<double>(held), kTolerance);
  EXPECT_EQ(allocator.stats().reserved_bytes[0].current, static_cast<std::int64_t>(64 * MiB));
  (void)allocator.empty_cache();
  EXPECT_NEAR(static_cast<double>(held - rss_bytes()), static_cast<double>(64 * MiB), kTolerance);
}

TEST(HostMemory, WritesLandAndBlocksDoNotOverlap) {
  CachingAllocator allocator(std::make_shared<HostBackend>(), AllocatorConfig{});
  constexpr int kBlocks = 64;
  unsigned char* blocks[kBlocks];
  for (int i = 0; i < kBlocks; ++i) {
    blocks[i] =
        static_cast<unsigned char*>(allocator.allocate(4096 + static_cast<std::size_t>(i) * 512));
    std::memset(blocks[i], i, 4096 + static_cast<std::size_t>(i) * 512);
  }
  for (int i = 0; i < kBlocks; ++i) {
    const std::size_t size = 4096 + static_cast<std::size_t>(i) * 512;
    EXPECT_EQ(blocks[i][0], i);
    EXPECT_EQ(blocks[i][size - 1], i);
    allocator.deallocate(blocks[i]);
  }
}

TEST(HostMemory, RefusesMoreThanTheMachineHasAsOutOfMemory) {
  auto host = std::make_shared<HostBackend>();
  CachingAllocator allocator(host, AllocatorConfig{});
  EXPECT_THROW((void)allocator.allocate(host->capacity() + 1 * GiB), OutOfMemoryError);
  void* p = allocator.allocate(1 * MiB);
  EXPECT_NE(p, nullptr);
  allocator.deallocate(p);
}

}  // namespace
}  // namespace memscope

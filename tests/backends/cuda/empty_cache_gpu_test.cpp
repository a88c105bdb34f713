// The scenario users know from torch.cuda.empty_cache(): allocate 1.5 GiB, replace it with a
// small buffer, empty the cache, and check with NVML (what nvidia-smi shows) that the process's
// GPU memory fell by exactly what empty_cache() says it released, and that what the process
// holds beyond its context is what the allocator reserves. Skipped without a GPU or NVML.
//
// With MEMSCOPE_GPU_RESULTS_DIR set, the figures are also written to empty_cache.json there
// (scripts/gpu-check prints them in its summary).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "gpu_support.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/cuda_backend.hpp"
#include "memscope/device_probe.hpp"
#include "memscope/units.hpp"

namespace {

using memscope::MiB;
using namespace std::chrono_literals;

constexpr std::int64_t kTolerance = 2 * static_cast<std::int64_t>(MiB);

std::int64_t reserved(const memscope::CachingAllocator& allocator) {
  return allocator.stats().reserved_bytes[0].current;
}

void write_results(const nlohmann::json& results) {
  const char* dir = std::getenv("MEMSCOPE_GPU_RESULTS_DIR");  // NOLINT(concurrency-mt-unsafe)
  if (dir == nullptr || *dir == '\0') return;
  std::filesystem::create_directories(dir);
  std::ofstream(std::filesystem::path(dir) / "empty_cache.json") << results.dump(2) << "\n";
}

TEST(EmptyCacheGpu, NvmlSeesTheReleasedBytesAndOurReservedBytes) {
  MEMSCOPE_REQUIRE_GPU();
  const memscope::Availability nvml = memscope::NvmlProbe::available();
  if (!nvml.available) GTEST_SKIP() << "NVML unavailable: " << nvml.reason;

  auto backend = std::make_shared<memscope::CudaBackend>(0);
  memscope::testing::GpuWork work(*backend);
  memscope::CachingAllocator allocator(backend, memscope::AllocatorConfig{});
  const memscope::NvmlProbe probe;
  const unsigned index = probe.nvml_index_of(0);

  // Warm up: the first allocation and memset make the driver set up what it keeps for the
  // context; the baseline is taken after that, with nothing reserved by us.
  void* warm = allocator.allocate(1 * MiB);
  work.fill(warm, 0, 1 * MiB, memscope::kDefaultStream);
  (void)work.read(warm, 1);
  allocator.deallocate(warm);
  (void)allocator.empty_cache();
  ASSERT_EQ(reserved(allocator), 0);
  const memscope::testing::NvmlView view(probe, index);
  const std::int64_t before = view.settled();

  const std::size_t big_size = 1536 * MiB;
  void* big = allocator.allocate(big_size);
  work.fill(big, 1, big_size, memscope::kDefaultStream);
  (void)work.read(big, 1);
  const std::int64_t after_big = view.settled();

  allocator.deallocate(big);
  void* small = allocator.allocate(1 * MiB);
  work.fill(small, 2, 1 * MiB, memscope::kDefaultStream);
  (void)work.read(small, 1);
  const std::int64_t after_small = view.settled();

  const std::size_t released = allocator.empty_cache();
  const std::int64_t after_empty = view.settled();
  const std::int64_t reserved_after = reserved(allocator);

  const std::int64_t nvml_drop = after_small - after_empty;
  const std::int64_t nvml_held = after_empty - before;  // what the process holds beyond baseline
  const bool drop_ok = std::llabs(nvml_drop - static_cast<std::int64_t>(released)) <= kTolerance;
  const bool held_ok = std::llabs(nvml_held - reserved_after) <= kTolerance;

  nlohmann::json results = {{"device", backend->device_name()},
                            {"source", view.source()},
                            {"before", before},
                            {"after_big", after_big},
                            {"after_small", after_small},
                            {"after_empty_cache", after_empty},
                            {"released_by_empty_cache", released},
                            {"nvml_drop", nvml_drop},
                            {"allocator_reserved", reserved_after},
                            {"nvml_held_beyond_baseline", nvml_held},
                            {"tolerance", kTolerance},
                            {"passed", drop_ok && held_ok}};
  write_results(results);
  std::cout << "empty_cache scenario: " << results.dump() << "\n";

  EXPECT_EQ(released, big_size) << "empty_cache released something other than the 1.5 GiB block";
  EXPECT_NEAR(static_cast<double>(after_big - before), static_cast<double>(big_size),
              static_cast<double>(kTolerance))
      << view.source();
  EXPECT_TRUE(drop_ok) << view.source() << ": NVML fell by " << memscope::format_bytes(nvml_drop)
                       << ", empty_cache() released "
                       << memscope::format_bytes(static_cast<std::int64_t>(released));
  EXPECT_TRUE(held_ok) << view.source() << ": NVML shows " << memscope::format_bytes(nvml_held)
                       << " beyond the baseline, the allocator reserves "
                       << memscope::format_bytes(reserved_after);
  allocator.deallocate(small);
}

}  // namespace

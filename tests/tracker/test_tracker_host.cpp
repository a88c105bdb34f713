// MemoryTracker with the host probe against real memory (mmap'd, so no allocator cache can
// blur the numbers), in kernel-hwm mode and in the forced sampling mode.
#include <chrono>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "../probes/host_probe_test_util.hpp"
#include "../probes/mapped_buffer.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/tracker.hpp"
#include "memscope/units.hpp"
#include "sanitizers.hpp"

namespace memscope {
namespace {

using namespace std::chrono_literals;
using testing::MappedBuffer;

std::int64_t get(const Metrics& m, const std::string& key) {
  return std::get<std::int64_t>(m.at(key));
}

bool kernel_mode(const MemoryTracker& tracker) {
  return tracker.sources().at(0).mode == "kernel-hwm";
}

TEST(TrackerHost, DefaultSourceIsThisProcess) {
  MemoryTracker tracker;
  ASSERT_EQ(tracker.sources().size(), 1u);
  EXPECT_EQ(tracker.sources()[0].label, "cpu");
  EXPECT_TRUE(tracker.sources()[0].available);
}

TEST(TrackerHost, KeptAndTransientMemory) {
  MemoryTracker tracker;
  if (!kernel_mode(tracker)) GTEST_SKIP() << tracker.describe_sources();
  std::optional<MappedBuffer> kept;
  {
    auto stage = tracker.stage("train");
    kept.emplace(256 * MiB);
    { MappedBuffer transient(512 * MiB); }
  }
  Metrics m = tracker.metrics("train");
  EXPECT_MIB_NEAR(get(m, "train_mem_cpu_alloc_delta"), 256, 4);
  EXPECT_MIB_NEAR(get(m, "train_mem_cpu_peaked_delta"), 512, 8);
  // How it measured, and the kernel's RSS counters' slack, are notes, not metrics.
  EXPECT_FALSE(m.contains("train_mem_cpu_mode"));
  EXPECT_FALSE(m.contains("train_mem_cpu_peak_bound"));
  const std::string note = tracker.notes().at("cpu");
  EXPECT_NE(note.find("kernel-hwm, peaks within "), std::string::npos) << note;
}

// Kernel-hwm stages reset VmHWM (and ru_maxrss, what /usr/bin/time reports); the lifetime peak
// survives in process_peak_rss().
TEST(TrackerHost, ProcessPeakOutlivesTheStagesResets) {
  if (testing::kThreadSanitizer) GTEST_SKIP() << testing::kRssUnderTsan;
  TrackerOptions options;
  options.report_modes = true;  // for train_mem_cpu_peak_bound
  MemoryTracker tracker(options);
  if (!kernel_mode(tracker)) GTEST_SKIP() << tracker.describe_sources();
  const std::int64_t before = read_host_memory().rss;
  {
    auto stage = tracker.stage("train");
    MappedBuffer transient(256 * MiB);
  }
  const std::int64_t transient_peak = before + static_cast<std::int64_t>(256 * MiB);
  auto eval = tracker.stage("eval");  // resets VmHWM
  EXPECT_LT(read_host_memory().hwm, transient_peak - static_cast<std::int64_t>(128 * MiB));
  const std::int64_t bound = get(tracker.metrics("train"), "train_mem_cpu_peak_bound");
  EXPECT_GE(process_peak_rss(), transient_peak - bound - static_cast<std::int64_t>(4 * MiB));
}

// The no-reset mode never writes clear_refs: VmHWM stays where it was.
TEST(TrackerHost, NoResetModeLeavesVmHwmAlone) {
  if (testing::kThreadSanitizer) GTEST_SKIP() << testing::kRssUnderTsan;
  { MappedBuffer spike(128 * MiB); }
  const std::int64_t hwm = read_host_memory().hwm;
  MemoryTracker tracker({.sources = {make_host_source(HostProbeOptions{.force_sampling = true})}});
  for (int i = 0; i < 10; ++i) {
    auto outer = tracker.stage("outer");
    auto inner = tracker.stage("inner");
    EXPECT_GE(read_host_memory().hwm, hwm);
  }
  EXPECT_GE(read_host_memory().hwm, hwm);
}

TEST(TrackerHost, NestedStagesBothExact) {
  MemoryTracker tracker;
  if (!kernel_mode(tracker)) GTEST_SKIP() << tracker.describe_sources();
  tracker.start("train");
  MappedBuffer model(128 * MiB);
  { MappedBuffer activations(384 * MiB); }  // train's peak, before eval starts
  tracker.start("eval");
  MappedBuffer cache(64 * MiB);
  { MappedBuffer batch(256 * MiB); }
  tracker.stop("eval");
  tracker.stop("train");
  Metrics train = tracker.metrics("train");
  Metrics eval = tracker.metrics("eval");
  EXPECT_MIB_NEAR(get(eval, "eval_mem_cpu_alloc_delta"), 64, 4);
  EXPECT_MIB_NEAR(get(eval, "eval_mem_cpu_peaked_delta"), 256, 8);
  EXPECT_MIB_NEAR(get(train, "train_mem_cpu_alloc_delta"), 128 + 64, 4);
  EXPECT_MIB_NEAR(get(train, "train_mem_cpu_peaked_delta"), 384 - 64, 8);
}

TEST(TrackerHost, SamplingFallbackWithinItsTolerance) {
  MemoryTracker tracker({.sources = {make_host_source(HostProbeOptions{.force_sampling = true})}});
  std::optional<MappedBuffer> kept;
  tracker.start("train");
  kept.emplace(256 * MiB);
  {
    MappedBuffer transient(512 * MiB);
    std::this_thread::sleep_for(30ms);  // live for many sampling intervals
  }
  tracker.stop("train");
  Metrics m = tracker.metrics("train");
  EXPECT_MIB_NEAR(get(m, "train_mem_cpu_alloc_delta"), 256, 16);
  EXPECT_MIB_NEAR(get(m, "train_mem_cpu_peaked_delta"), 512, 16);
  EXPECT_NE(tracker.notes().at("cpu").find("sampling 1ms"), std::string::npos);
  EXPECT_NE(tracker.describe_sources().find("sampling 1ms"), std::string::npos);
}

TEST(TrackerHost, HostAndDeviceTogether) {
  CachingAllocator gpu{std::make_shared<SimulatedBackend>(64 * GiB)};
  MemoryTracker tracker(
      {.sources = {make_host_source(), make_allocator_source(gpu)}, .report_modes = true});
  if (!kernel_mode(tracker)) GTEST_SKIP() << tracker.describe_sources();
  tracker.start("train");
  MappedBuffer host(64 * MiB);
  void* device = gpu.allocate(512 * MiB);
  tracker.stop("train");
  Metrics m;
  tracker.update_metrics("train", m);
  EXPECT_MIB_NEAR(get(m, "train_mem_cpu_alloc_delta"), 64, 4);
  EXPECT_EQ(get(m, "train_mem_gpu_alloc_delta"), static_cast<std::int64_t>(512 * MiB));
  EXPECT_TRUE(m.contains("before_init_mem_cpu"));
  EXPECT_TRUE(m.contains("before_init_mem_gpu"));
  EXPECT_TRUE(m.contains("init_mem_cpu_alloc_delta"));
  EXPECT_TRUE(m.contains("train_mem_cpu_peak_bound"));
  EXPECT_FALSE(m.contains("train_mem_gpu_peak_bound"));  // the allocator is exact
  gpu.deallocate(device);
}

}  // namespace
}  // namespace memscope

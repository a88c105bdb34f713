// Stages started and stopped from several threads at once, over the sampling thread and an
// allocator: run under TSan in CI, these are the race detectors' test; here they also check
// that every stage finishes with sane numbers.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "memscope/caching_allocator.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/tracker.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

void run_threads(MemoryTracker& tracker, CachingAllocator& gpu) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 100;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      (void)tracker.running_stages();
      (void)tracker.describe_sources();
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      const std::string name = "worker" + std::to_string(t);
      for (int i = 0; i < kRounds; ++i) {
        auto stage = tracker.stage(name);
        void* p = gpu.allocate(static_cast<std::size_t>(t + 1) * MiB);
        gpu.deallocate(p);
      }
    });
  }
  for (auto& w : workers) w.join();
  done = true;
  reader.join();
  for (int t = 0; t < kThreads; ++t) {
    const std::string name = "worker" + std::to_string(t);
    Metrics m = tracker.metrics(name);
    // Other threads' blocks come and go inside each stage, so only bounds are known: this
    // stage's own block was live at some point, and nothing was live at the end for sure.
    EXPECT_GE(std::get<std::int64_t>(m.at(name + "_mem_gpu_peak")),
              static_cast<std::int64_t>(t + 1) * static_cast<std::int64_t>(MiB))
        << name;
    EXPECT_GE(std::get<std::int64_t>(m.at(name + "_mem_cpu_peaked_delta")), 0);
  }
  EXPECT_TRUE(tracker.running_stages().empty());
}

TEST(TrackerThreads, StagesFromSeveralThreadsKernelMode) {
  CachingAllocator gpu{std::make_shared<SimulatedBackend>(64 * GiB)};
  MemoryTracker tracker(
      {.sources = {make_host_source(), make_allocator_source(gpu)}, .absolute_values = true});
  run_threads(tracker, gpu);
}

TEST(TrackerThreads, StagesFromSeveralThreadsSamplingMode) {
  CachingAllocator gpu{std::make_shared<SimulatedBackend>(64 * GiB)};
  MemoryTracker tracker({.sources = {make_host_source(HostProbeOptions{
                                         .force_sampling = true,
                                         .sampling_interval = std::chrono::microseconds(200)}),
                                     make_allocator_source(gpu)},
                         .absolute_values = true});
  run_threads(tracker, gpu);
}

}  // namespace
}  // namespace memscope

// The NVML tracker source where NVML is missing, and the polling peak windows it is built on.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "memscope/device_probe.hpp"
#include "memscope/errors.hpp"
#include "memscope/memory_source.hpp"
#include "probes/nvml/peak_sampler.hpp"

namespace {

using namespace std::chrono_literals;

TEST(NvmlSource, UnavailableWithoutNvmlAndSaysWhy) {
  const auto nvml = memscope::NvmlProbe::available();
  if (nvml.available) GTEST_SKIP() << "NVML is available here; the GPU tests cover the source";
  const auto source = memscope::make_nvml_source();
  EXPECT_FALSE(source->available());
  EXPECT_EQ(source->kind(), memscope::SourceKind::gpu);
  EXPECT_EQ(source->reason(), nvml.reason);
  EXPECT_EQ(source->mode(), "unavailable: " + nvml.reason);
}

TEST(NvmlSource, RejectsANonPositiveInterval) {
  memscope::NvmlSourceOptions options;
  options.sampling_interval = 0us;
  EXPECT_THROW((void)memscope::make_nvml_source(options), memscope::UsageError);
}

TEST(PeakSampler, WindowsSeeAPeakBetweenTheirEndsInAnyOrder) {
  std::atomic<std::int64_t> value{100};
  memscope::detail::PeakSampler sampler([&value] { return value.load(); }, 1ms);
  auto outer = sampler.open(sampler.read());
  value = 500;
  std::this_thread::sleep_for(50ms);  // many intervals: the thread must have seen it
  auto inner = sampler.open(sampler.read());
  value = 300;
  std::this_thread::sleep_for(50ms);
  value = 900;
  std::this_thread::sleep_for(50ms);
  value = 200;
  // Outer closes first, inner later: each keeps its own peak.
  EXPECT_EQ(sampler.close(outer, value.load()), 900);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(sampler.close(inner, value.load()), 900);
  auto late = sampler.open(sampler.read());
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(sampler.close(late, value.load()), 200) << "a window opened after the peak";
}

TEST(PeakSampler, ReadingsThatThrowAreSkipped) {
  std::atomic<int> calls{0};
  memscope::detail::PeakSampler sampler(
      [&calls]() -> std::int64_t {
        if (++calls % 2 == 0) throw memscope::BackendError("flaky");
        return 7;
      },
      1ms);
  auto slot = sampler.open(0);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(sampler.close(slot, 1), 7);
  EXPECT_GT(calls.load(), 2);
}

}  // namespace

// HostProbe in sampling mode (forced): peaks within the sampling tolerance, the mode stated,
// and a thread that sleeps instead of spinning.
#include <time.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "host_probe_test_util.hpp"
#include "mapped_buffer.hpp"
#include "memscope/host_probe.hpp"

namespace memscope {
namespace {

using namespace std::chrono_literals;
using testing::MappedBuffer;

HostProbeOptions sampling(std::chrono::microseconds interval = 1ms) {
  return HostProbeOptions{.force_sampling = true, .sampling_interval = interval};
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

TEST(HostProbeSampling, SaysWhichModeAndWhy) {
  HostProbe probe(sampling());
  EXPECT_EQ(probe.mode(), HostPeakMode::sampling);
  EXPECT_EQ(probe.mode_name(), "sampling 1ms");
  EXPECT_NE(probe.fallback_reason().find("force_sampling"), std::string::npos);
  EXPECT_EQ(HostProbe(sampling(500us)).mode_name(), "sampling 500us");
  EXPECT_EQ(HostProbe(sampling(2s)).mode_name(), "sampling 2s");
}

TEST(HostProbeSampling, MeasuresKeptAndTransientMemory) {
  HostProbe probe(sampling());
  HostProbe::Window w = probe.open_window();
  MappedBuffer kept(256 * MiB);
  {
    MappedBuffer transient(512 * MiB);
    std::this_thread::sleep_for(30ms);  // a sampler can only see what lives for an interval
  }
  HostProbe::Window::Reading r = w.close();
  EXPECT_MIB_NEAR(r.current - w.begin(), 256, 16);
  EXPECT_MIB_NEAR(r.peak - r.current, 512, 16);
}

TEST(HostProbeSampling, NestedWindowsAreBothExact) {
  HostProbe probe(sampling());
  HostProbe::Window outer = probe.open_window();
  {
    MappedBuffer spike(384 * MiB);
    std::this_thread::sleep_for(30ms);
  }
  HostProbe::Window inner = probe.open_window();
  {
    MappedBuffer inner_spike(128 * MiB);
    std::this_thread::sleep_for(30ms);
  }
  EXPECT_MIB_NEAR(inner.close().peak - inner.begin(), 128, 16);
  EXPECT_MIB_NEAR(outer.close().peak - outer.begin(), 384, 16);
}

TEST(HostProbeSampling, SamplerSleepsInsteadOfSpinning) {
  HostProbe probe(sampling());
  double idle_start = process_cpu_seconds();
  std::this_thread::sleep_for(200ms);  // no window open: the sampler must block
  double idle = process_cpu_seconds() - idle_start;
  EXPECT_LT(idle, 0.02) << "sampler used CPU with no window open";

  HostProbe::Window w = probe.open_window();
  double busy_start = process_cpu_seconds();
  std::this_thread::sleep_for(200ms);  // ~200 samples of a few microseconds each
  double sampling_cpu = process_cpu_seconds() - busy_start;
  w.close();
  // A spinning thread would burn ~0.2 s here; sleeping costs a few ms (more under sanitizers).
  EXPECT_LT(sampling_cpu, 0.06) << "sampler looks busy";
}

TEST(HostProbeSampling, ResetPeakIsHarmless) {
  HostProbe probe(sampling());
  HostProbe::Window w = probe.open_window();
  {
    MappedBuffer spike(128 * MiB);
    std::this_thread::sleep_for(20ms);
  }
  probe.reset_peak();
  EXPECT_MIB_NEAR(w.close().peak - w.begin(), 128, 16);
}

}  // namespace
}  // namespace memscope

// HostProbe in kernel-hwm mode against real memory: exact peaks for single, nested and
// overlapping windows, resets that disturb nothing, and probes sharing one process.
#include <unistd.h>

#include <optional>

#include <gtest/gtest.h>

#include "host_probe_test_util.hpp"
#include "mapped_buffer.hpp"
#include "memscope/errors.hpp"
#include "memscope/host_probe.hpp"

namespace memscope {
namespace {

using testing::MappedBuffer;

// Kernel mode needs a writable /proc/self/clear_refs; CI machines have it, some sandboxes don't.
#define REQUIRE_KERNEL_MODE(probe)                                                \
  if ((probe).mode() != HostPeakMode::kernel_hwm) {                               \
    GTEST_SKIP() << "kernel-hwm mode unavailable: " << (probe).fallback_reason(); \
  }

TEST(HostProbe, UsesTheKernelPeakWhereItCan) {
  HostProbe probe;
  REQUIRE_KERNEL_MODE(probe);
  EXPECT_EQ(probe.mode_name(), "kernel-hwm");
  EXPECT_TRUE(probe.fallback_reason().empty());
  EXPECT_EQ(probe.pid(), getpid());
}

TEST(HostProbe, WindowMeasuresKeptAndTransientMemory) {
  HostProbe probe;
  REQUIRE_KERNEL_MODE(probe);
  HostProbe::Window w = probe.open_window();
  MappedBuffer kept(256 * MiB);
  { MappedBuffer transient(512 * MiB); }
  HostProbe::Window::Reading r = w.close();
  EXPECT_MIB_NEAR(r.current - w.begin(), 256, 4);
  EXPECT_MIB_NEAR(r.peak - r.current, 512, 8);
  EXPECT_FALSE(w.is_open());
  EXPECT_EQ(w.read().peak, r.peak);  // frozen once closed
}

TEST(HostProbe, NestedWindowsAreBothExact) {
  HostProbe probe;
  REQUIRE_KERNEL_MODE(probe);
  HostProbe::Window outer = probe.open_window();
  { MappedBuffer spike(512 * MiB); }  // only the outer window sees this
  // Opening the inner window resets VmHWM; the outer 512 MiB must survive it.
  HostProbe::Window inner = probe.open_window();
  MappedBuffer kept(128 * MiB);
  { MappedBuffer inner_spike(256 * MiB); }
  HostProbe::Window::Reading in = inner.close();
  HostProbe::Window::Reading out = outer.close();
  EXPECT_MIB_NEAR(in.current - inner.begin(), 128, 4);
  EXPECT_MIB_NEAR(in.peak - inner.begin(), 128 + 256, 8);
  EXPECT_MIB_NEAR(out.current - outer.begin(), 128, 4);
  EXPECT_MIB_NEAR(out.peak - outer.begin(), 512, 8);
}

TEST(HostProbe, OverlappingWindowsClosedOutOfOrder) {
  HostProbe probe;
  REQUIRE_KERNEL_MODE(probe);
  HostProbe::Window a = probe.open_window();
  HostProbe::Window b = probe.open_window();
  { MappedBuffer both(300 * MiB); }
  HostProbe::Window::Reading ra = a.close();  // a closes while b (opened later) stays open
  HostProbe::Window c = probe.open_window();  // a reset after a closed must not lose b's 300
  { MappedBuffer later(100 * MiB); }
  HostProbe::Window::Reading rc = c.close();
  HostProbe::Window::Reading rb = b.close();
  EXPECT_MIB_NEAR(ra.peak - a.begin(), 300, 8);
  EXPECT_MIB_NEAR(rb.peak - b.begin(), 300, 8);
  EXPECT_MIB_NEAR(rc.peak - c.begin(), 100, 8);
}

TEST(HostProbe, ReadWhileOpenSeesThePeakSoFar) {
  HostProbe probe;
  REQUIRE_KERNEL_MODE(probe);
  HostProbe::Window w = probe.open_window();
  { MappedBuffer spike(200 * MiB); }
  EXPECT_MIB_NEAR(w.read().peak - w.begin(), 200, 8);
  { MappedBuffer bigger(300 * MiB); }
  EXPECT_MIB_NEAR(w.read().peak - w.begin(), 300, 8);
  EXPECT_TRUE(w.is_open());
}

TEST(HostProbe, ResetPeakResetsTheKernelButNoWindow) {
  HostProbe probe;
  REQUIRE_KERNEL_MODE(probe);
  HostProbe::Window w = probe.open_window();
  { MappedBuffer spike(400 * MiB); }
  probe.reset_peak();
  HostMemory m = read_host_memory();
  EXPECT_LT(m.hwm - m.rss, static_cast<std::int64_t>(8 * MiB)) << "VmHWM was not reset";
  EXPECT_MIB_NEAR(w.close().peak - w.begin(), 400, 8);
}

TEST(HostProbe, ProbesOnOneProcessShareTheKernelPeak) {
  HostProbe first;
  REQUIRE_KERNEL_MODE(first);
  HostProbe::Window w = first.open_window();
  { MappedBuffer spike(256 * MiB); }
  HostProbe second;  // a second probe and its window reset VmHWM again
  HostProbe::Window w2 = second.open_window();
  w2.close();
  EXPECT_MIB_NEAR(w.close().peak - w.begin(), 256, 8);
}

TEST(HostProbe, WindowMayOutliveItsProbe) {
  std::optional<HostProbe> probe(std::in_place);
  HostProbe::Window w = probe->open_window();
  probe.reset();
  MappedBuffer kept(32 * MiB);
  EXPECT_MIB_NEAR(w.close().current - w.begin(), 32, 4);
}

TEST(HostProbe, MovedWindowKeepsMeasuring) {
  HostProbe probe;
  HostProbe::Window w = probe.open_window();
  HostProbe::Window moved = std::move(w);
  EXPECT_FALSE(w.is_open());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_TRUE(moved.is_open());
  MappedBuffer kept(16 * MiB);
  EXPECT_MIB_NEAR(moved.close().current - moved.begin(), 16, 4);
}

TEST(HostProbe, RejectsBadOptions) {
  EXPECT_THROW(HostProbe(HostProbeOptions{.pid = -3}), UsageError);
  EXPECT_THROW(HostProbe(HostProbeOptions{.sampling_interval = std::chrono::microseconds(0)}),
               UsageError);
  // pid_max is at most 2^22, so this process cannot exist.
  EXPECT_THROW(HostProbe(HostProbeOptions{.pid = 1 << 23}), BackendUnavailableError);
}

}  // namespace
}  // namespace memscope

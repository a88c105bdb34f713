// fork() while other threads are inside the tracker and the probes: every child must neither
// hang (a lock copied while held) nor read its parent's /proc files (descriptors opened on
// /proc/self before the fork name the parent). The children check themselves and _exit with a
// code that says what went wrong; the parent waits for each with a timeout.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "../probes/mapped_buffer.hpp"
#include "memscope/host_probe.hpp"
#include "memscope/tracker.hpp"
#include "memscope/units.hpp"
#include "sanitizers.hpp"

namespace memscope {
namespace {

using namespace std::chrono_literals;
using testing::MappedBuffer;

// What a child exits with.
enum ChildResult : int {
  kOk = 0,
  kThrew = 10,
  kWrongPid = 11,
  kParentsRss = 12,       // the probe read a different process's statm
  kParentsStatus = 13,    // ... or status
  kWrongStageDelta = 14,  // the tracker's stage did not see the child's memory
  kSamplingBroken = 15,
};

std::int64_t own_statm_rss() {
  char buf[128] = {};
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  const ssize_t n = fd < 0 ? -1 : ::read(fd, buf, sizeof buf - 1);
  if (fd >= 0) ::close(fd);
  if (n <= 0) return -1;
  long long size = 0;
  long long resident = 0;
  if (std::sscanf(buf, "%lld %lld", &size, &resident) != 2) return -1;
  return resident * sysconf(_SC_PAGESIZE);
}

bool near(std::int64_t a, std::int64_t b, std::int64_t tolerance) {
  return a - b <= tolerance && b - a <= tolerance;
}

int child_body(MemoryTracker& tracker, HostProbe& probe, HostProbe& sampling) {
  alarm(20);  // a hang past this kills the child with SIGALRM: the parent reports it
  try {
    if (probe.pid() != getpid() || HostProbe().pid() != getpid()) return kWrongPid;
    constexpr std::int64_t kChildBytes = 8 * static_cast<std::int64_t>(MiB);
    const std::int64_t tolerance = 2 * static_cast<std::int64_t>(MiB);
    tracker.start("child");
    MappedBuffer mine(static_cast<std::size_t>(kChildBytes));
    // Read right after the child's own statm: nothing of the child changes in between.
    const std::int64_t own = own_statm_rss();
    const std::int64_t seen = probe.current_rss();
    const std::int64_t status_rss = probe.read().rss;
    tracker.stop("child");
    if (!testing::kThreadSanitizer) {  // TSan's shadow memory makes RSS figures meaningless
      if (!near(seen, own, tolerance)) return kParentsRss;
      if (!near(status_rss, own, tolerance)) return kParentsStatus;
      const auto delta =
          std::get<std::int64_t>(tracker.metrics("child").at("child_mem_cpu_alloc_delta"));
      if (!near(delta, kChildBytes, tolerance)) return kWrongStageDelta;
      // The sampling thread stayed in the parent: the inherited probe starts a new one. (Not
      // under TSan, which refuses new threads in the child of a multi-threaded process.)
      HostProbe::Window w = sampling.open_window();
      std::this_thread::sleep_for(2ms);
      if (!near(w.close().current, own_statm_rss(), tolerance)) return kSamplingBroken;
    }
  } catch (...) {
    return kThrew;
  }
  return kOk;
}

// Waits up to `limit` for `pid`; kills it and returns -1 if it is still running.
int wait_with_timeout(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(200us);
  }
  return status;
}

TEST(TrackerFork, ChildrenOfABusyProcessNeitherHangNorReadTheParent) {
  auto probe = std::make_shared<HostProbe>();
  auto sampling = std::make_shared<HostProbe>(HostProbeOptions{.force_sampling = true});
  MemoryTracker tracker({.sources = {make_host_source(probe)}});
  std::atomic<bool> done{false};
  // Inside the tracker and both probes' locks, all the time.
  std::thread hammer([&] {
    while (!done.load()) {
      tracker.start("hammer");
      (void)probe->current_rss();
      (void)probe->read();
      {
        HostProbe::Window w = sampling->open_window();
        (void)w.read();
      }
      tracker.stop("hammer");
      (void)tracker.metrics("hammer");
    }
  });
  // Probes and their shared kernel-mode domain created and destroyed all the time.
  std::thread churn([&] {
    while (!done.load()) {
      HostProbe p;
      HostProbe::Window w = p.open_window();
      (void)w.close();
    }
  });
  constexpr int kForks = 200;
  int failures = 0;
  for (int i = 0; i < kForks && failures < 5; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) _exit(child_body(tracker, *probe, *sampling));
    const int status = wait_with_timeout(pid, 20s);
    if (status == -1) {
      ADD_FAILURE() << "child " << i << " hung";
      ++failures;
    } else if (WIFSIGNALED(status)) {
      ADD_FAILURE() << "child " << i << " died of signal " << WTERMSIG(status)
                    << (WTERMSIG(status) == SIGALRM ? " (it hung)" : "");
      ++failures;
    } else if (WEXITSTATUS(status) != kOk) {
      ADD_FAILURE() << "child " << i << " exited with " << WEXITSTATUS(status)
                    << " (see ChildResult)";
      ++failures;
    }
  }
  done = true;
  hammer.join();
  churn.join();
}

}  // namespace
}  // namespace memscope

// fork() while another thread is inside the allocator: the child must find every allocator
// unlocked and consistent (CachingAllocator locks them all around fork with pthread_atfork).
// Before that, about 1 fork in 100-300 left the child deadlocked on its first allocation.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "allocator_invariants.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/host_backend.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

constexpr int kForks = 300;
constexpr unsigned kChildSeconds = 20;  // a child still running by then is deadlocked

// In the child: allocate and free once on each allocator, then _exit. alarm() kills a child
// that hangs, so the parent sees SIGALRM instead of waiting forever. Only async-signal-safe
// calls besides the allocator's own.
[[noreturn]] void child(const std::vector<CachingAllocator*>& allocators) {
  alarm(kChildSeconds);
  int code = 0;
  try {
    for (CachingAllocator* allocator : allocators) {
      void* p = allocator->allocate(4096);
      if (p == nullptr) code = 2;
      allocator->deallocate(p);
      if (allocator->stats().allocation[0].current < 0) code = 3;
    }
  } catch (...) {
    code = 4;
  }
  _exit(code);
}

// What became of a child: "" when it exited with 0.
std::string outcome(int status) {
  if (WIFEXITED(status)) {
    return WEXITSTATUS(status) == 0 ? "" : "exited with " + std::to_string(WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return WTERMSIG(status) == SIGALRM ? "hung (killed by its alarm)"
                                       : "killed by signal " + std::to_string(WTERMSIG(status));
  }
  return "status " + std::to_string(status);
}

TEST(Fork, ChildrenAllocateWhileAnotherThreadHammersTheAllocators) {
  // Two allocators, so the fork handlers lock more than one; the host one calls mmap and
  // munmap under its lock, the simulated one takes the backend's own lock under it.
  CachingAllocator host(std::make_shared<HostBackend>());
  CachingAllocator sim(std::make_shared<SimulatedBackend>(4 * GiB));
  const std::vector<CachingAllocator*> allocators{&host, &sim};
  std::atomic<bool> stop{false};
  std::thread hammer([&allocators, &host, &stop] {  // one thread, so the children get a core
    std::size_t size = 512;
    while (!stop.load(std::memory_order_relaxed)) {
      for (CachingAllocator* allocator : allocators) {
        // The host backend faults in (zeroes) whole segments: small ones only there.
        void* a = allocator->allocate(size);
        void* b = allocator->allocate(allocator == &host ? 4096 : 3 * MiB);
        allocator->deallocate(a);
        allocator->deallocate(b);
        (void)allocator->empty_cache();
      }
      size = size % MiB + 4096;
    }
  });
  std::vector<std::string> failures;
  for (int i = 0; i < kForks; ++i) {
    const pid_t pid = fork();
    ASSERT_NE(pid, -1) << "fork failed, errno " << errno;
    if (pid == 0) child(allocators);
    int status = 0;
    pid_t waited = -1;
    do {
      waited = waitpid(pid, &status, 0);
    } while (waited == -1 && errno == EINTR);
    ASSERT_EQ(waited, pid);
    if (std::string what = outcome(status); !what.empty()) {
      failures.push_back("fork " + std::to_string(i) + ": child " + what);
    }
  }
  stop = true;
  hammer.join();
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << kForks
                                << " children failed; first: " << failures.front();
  for (CachingAllocator* allocator : allocators) {
    EXPECT_TRUE(testing::allocator_consistent(*allocator));
  }
}

// The fork handlers cope with allocators created and destroyed around forks, and with none.
TEST(Fork, AllocatorsComeAndGoBetweenForks) {
  for (int i = 0; i < 3; ++i) {
    std::vector<CachingAllocator*> allocators;
    std::vector<std::unique_ptr<CachingAllocator>> owned;
    for (int n = 0; n < i; ++n) {
      owned.push_back(
          std::make_unique<CachingAllocator>(std::make_shared<SimulatedBackend>(1 * GiB)));
      allocators.push_back(owned.back().get());
    }
    const pid_t pid = fork();
    ASSERT_NE(pid, -1);
    if (pid == 0) child(allocators);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_EQ(outcome(status), "") << i << " allocators";
  }
}

}  // namespace
}  // namespace memscope

// Expandable segments when the address space is short, with the kernel's own limit: a child
// process lowers RLIMIT_AS to 8 GiB above what it uses, so a stream's range sized by the memory
// limit (the machine's memory) cannot be reserved whole. The allocator must reserve smaller
// ranges and serve every stream, not fail with memory to spare. Skipped under sanitizers (their
// shadow memory needs far more address space than the limit allows).
//
// Regression: each new range took the largest halving of the memory limit that still fit
// (6 GiB, 1.5 GiB, 0.4 GiB, 0.2 GiB here), so the fifth stream found no address space and got
// OutOfMemoryError with 22 GiB free. Now a range reserved when address space is short takes an
// eighth of what still fits.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>

#include "expandable_checks.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/host_backend.hpp"
#include "memscope/units.hpp"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MEMSCOPE_EXPANDABLE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MEMSCOPE_EXPANDABLE_SANITIZED 1
#endif
#endif

namespace memscope {
namespace {

constexpr std::size_t kHeadroom = 8 * GiB;
constexpr int kStreams = 16;

// In the child: exit codes say what went wrong (the parent names them).
enum Exit : int { ok = 0, no_limit = 2, refused = 3, unwritable = 4, inconsistent = 5 };

[[noreturn]] void child() {
  alarm(60);
  const std::int64_t vm = testing::proc_status_bytes("VmSize");
  const rlimit limit{static_cast<rlim_t>(vm) + kHeadroom, static_cast<rlim_t>(vm) + kHeadroom};
  if (vm <= 0 || setrlimit(RLIMIT_AS, &limit) != 0) _exit(no_limit);
  int code = ok;
  try {
    // memory_limit: the machine's memory, so a full-size range needs more than the headroom
    // on any machine with more than 8 GiB (the test's premise; see the parent).
    CachingAllocator allocator(std::make_shared<HostBackend>(),
                               AllocatorConfig::parse("expandable_segments:true"));
    for (int s = 1; s <= kStreams && code == ok; ++s) {
      void* p = allocator.allocate(64 * MiB, static_cast<StreamId>(s));
      if (p == nullptr) code = refused;
      std::memset(p, s, 64 * MiB);
      if (static_cast<unsigned char*>(p)[64 * MiB - 1] != s) code = unwritable;
    }
    if (code == ok && !testing::expandable_consistent(allocator)) code = inconsistent;
  } catch (const OutOfMemoryError&) {
    code = refused;
  } catch (...) {
    code = inconsistent;
  }
  _exit(code);
}

TEST(ExpandableAddressSpace, ShortAddressSpaceStillServesEveryStream) {
#ifdef MEMSCOPE_EXPANDABLE_SANITIZED
  GTEST_SKIP() << "sanitizer builds need more address space than the RLIMIT_AS this test sets";
#endif
  if (HostBackend().capacity() <= kHeadroom) {
    GTEST_SKIP() << "this machine's memory fits in the 8 GiB of address space the test leaves";
  }
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) child();
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died (signal " << WTERMSIG(status) << ")";
  switch (WEXITSTATUS(status)) {
    case ok:
      break;
    case no_limit:
      FAIL() << "the child could not set RLIMIT_AS";
    case refused:
      FAIL() << kStreams << " streams of 64 MiB were refused with 8 GiB of address space left";
    case unwritable:
      FAIL() << "an allocation was not writable";
    default:
      FAIL() << "the allocator's invariants broke (exit " << WEXITSTATUS(status) << ")";
  }
}

}  // namespace
}  // namespace memscope

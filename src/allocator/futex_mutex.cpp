// The slow paths of FutexMutex (include/memscope/detail/futex_mutex.hpp): spin, then sleep.
#include "memscope/detail/futex_mutex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace memscope::detail {
namespace {

// Spins before sleeping: about a critical section's length (a few hundred cycles per try).
constexpr int kSpins = 64;

void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

void futex(std::atomic<std::uint32_t>& word, int op, std::uint32_t value) noexcept {
  // The kernel compares and sleeps atomically: a wake-up between our check and the sleep is not
  // lost (the call returns EAGAIN at once). Errors (EINTR, EAGAIN) only mean "look again".
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  (void)::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), op | FUTEX_PRIVATE_FLAG,
                  value, nullptr, nullptr, 0);
}

}  // namespace

void FutexMutex::lock_contended() noexcept {
  for (int i = 0; i < kSpins; ++i) {
    std::uint32_t expected = 0;
    if (state_.load(std::memory_order_relaxed) == 0 &&
        state_.compare_exchange_weak(expected, 1, std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
      return;
    }
    cpu_relax();
  }
  // From here on the lock is taken as "held and maybe waited for" (2), so that whoever unlocks
  // it wakes the next sleeper; a state of 2 with nobody asleep costs one spare wake-up.
  while (state_.exchange(2, std::memory_order_acquire) != 0) {
    futex(state_, FUTEX_WAIT, 2);
  }
}

void FutexMutex::wake_one() noexcept {
  futex(state_, FUTEX_WAKE, 1);
}

}  // namespace memscope::detail

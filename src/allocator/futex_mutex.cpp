// The slow paths of FutexMutex (include/memscope/detail/futex_mutex.hpp): sleep and wake.
#include "memscope/detail/futex_mutex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace memscope::detail {
namespace {

void futex(std::atomic<std::uint32_t>& word, int op, std::uint32_t value) noexcept {
  // The kernel compares and sleeps atomically: a wake-up between our check and the sleep is not
  // lost (the call returns EAGAIN at once). Errors (EINTR, EAGAIN) only mean "look again".
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  (void)::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), op | FUTEX_PRIVATE_FLAG,
                  value, nullptr, nullptr, 0);
}

}  // namespace

void FutexMutex::lock_contended() noexcept {
  // No spinning: measured on 2 cores (docs/benchmarks.md, "Hot path"), a waiter that spins
  // pulls the lock's cache line away from the holder on every try; one that sleeps lets the
  // holder run on with the line to itself. Two threads sharing an allocator did 0.45-0.7 times
  // the pairs per second of one thread without spinning, 0.2-0.6 times with 64 spins.
  // The lock is taken as "held and maybe waited for" (2), so that whoever unlocks it wakes the
  // next sleeper; a state of 2 with nobody asleep costs one spare wake-up.
  while (state_.exchange(2, std::memory_order_acquire) != 0) {
    futex(state_, FUTEX_WAIT, 2);
  }
}

void FutexMutex::wake_one() noexcept {
  futex(state_, FUTEX_WAKE, 1);
}

}  // namespace memscope::detail

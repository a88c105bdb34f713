// InstructionCounter: the CPU's own count of user-space instructions retired by this thread,
// through perf_event_open(PERF_COUNT_HW_INSTRUCTIONS, exclude_kernel). It is exact and costs
// nothing while counting, so `make bench` can count instructions per hit pair without valgrind
// where the kernel allows it. Many virtual machines and containers do not: the guest has no
// PMU (ENOENT), perf_event_paranoid is 3 or a seccomp filter forbids the call (EACCES/EPERM).
// open() then says why, and callers fall back to callgrind (bench/instructions_per_pair.py).
//
// Thread safety: one counter counts the thread that opened it; use it from that thread only.
// Errors: open() returns nullopt with the reason; start()/stop() cannot fail once open.
#pragma once

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

namespace memscope::bench {

class InstructionCounter {
 public:
  // A counter of this thread's user-space instructions, stopped; nullopt and *why if the kernel
  // refuses.
  [[nodiscard]] static std::optional<InstructionCounter> open(std::string* why) {
    perf_event_attr attr{};
    attr.type = PERF_TYPE_HARDWARE;
    attr.size = sizeof(attr);
    attr.config = PERF_COUNT_HW_INSTRUCTIONS;
    attr.disabled = 1;
    attr.exclude_kernel = 1;  // user space only: allowed at perf_event_paranoid <= 2
    attr.exclude_hv = 1;
    const long fd = ::syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    if (fd < 0) {
      const int error = errno;
      if (why != nullptr) {
        *why = std::string("perf_event_open(PERF_COUNT_HW_INSTRUCTIONS): ") + std::strerror(error) +
               (error == ENOENT ? " (no hardware counter: a VM without a virtual PMU)"
                                : " (see /proc/sys/kernel/perf_event_paranoid)");
      }
      return std::nullopt;
    }
    return InstructionCounter(static_cast<int>(fd));
  }

  InstructionCounter(const InstructionCounter&) = delete;
  InstructionCounter& operator=(const InstructionCounter&) = delete;
  InstructionCounter(InstructionCounter&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  InstructionCounter& operator=(InstructionCounter&&) = delete;
  ~InstructionCounter() noexcept {
    if (fd_ >= 0) ::close(fd_);
  }

  // Resets the count to 0 and starts counting.
  void start() noexcept {
    ::ioctl(fd_, PERF_EVENT_IOC_RESET, 0);
    ::ioctl(fd_, PERF_EVENT_IOC_ENABLE, 0);
  }

  // Stops counting; the instructions since start().
  [[nodiscard]] std::uint64_t stop() noexcept {
    ::ioctl(fd_, PERF_EVENT_IOC_DISABLE, 0);
    std::uint64_t count = 0;
    if (::read(fd_, &count, sizeof(count)) != static_cast<ssize_t>(sizeof(count))) return 0;
    return count;
  }

 private:
  explicit InstructionCounter(int fd) noexcept : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace memscope::bench

// EventClock: cheap timestamps for recorded events. On x86-64 an event stores the time-stamp
// counter (a few ns to read, against about 20 ns for clock_gettime(), which would be most of an
// event's cost); the log converts the counts to system-clock microseconds only when exported,
// by a straight line through two (counter, system clock) readings: one when recording started
// and one when it stopped (freeze()), or at export while it still runs. So exports of a stopped
// recording give identical times. Elsewhere the counter is the system clock in nanoseconds.
//
// Assumes an invariant TSC (constant rate, synchronised across cores), as every x86-64 CPU of
// the last decade has; PyTorch's recorder makes the same assumption.
#pragma once

#include <chrono>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace memscope::detail {

class EventClock {
 public:
  EventClock() noexcept : start_ticks_(ticks()), start_ns_(system_ns()) {}

  // The raw reading an event stores.
  [[nodiscard]] static std::int64_t ticks() noexcept {
#if defined(__x86_64__)
    return static_cast<std::int64_t>(__rdtsc());
#else
    return system_ns();
#endif
  }

  // Fixes the line's second point now (the first call wins): later conversions all agree.
  void freeze() noexcept {
    if (frozen_) return;
    end_ticks_ = ticks();
    end_ns_ = system_ns();
    frozen_ = true;
  }

  // Converts readings taken since construction to microseconds since the epoch.
  class ToMicroseconds {
   public:
    explicit ToMicroseconds(const EventClock& clock) noexcept
        : ticks0_(clock.start_ticks_), ns0_(clock.start_ns_) {
      const std::int64_t dt = (clock.frozen_ ? clock.end_ticks_ : ticks()) - ticks0_;
      const std::int64_t dns = (clock.frozen_ ? clock.end_ns_ : system_ns()) - ns0_;
      ns_per_tick_ = dt > 0 && dns > 0 ? static_cast<double>(dns) / static_cast<double>(dt) : 0.0;
    }
    [[nodiscard]] std::int64_t operator()(std::int64_t reading) const noexcept {
      const double ns =
          static_cast<double>(ns0_) + static_cast<double>(reading - ticks0_) * ns_per_tick_;
      return static_cast<std::int64_t>(ns / 1000.0);
    }

   private:
    std::int64_t ticks0_;
    std::int64_t ns0_;
    double ns_per_tick_ = 1.0;
  };

 private:
  static std::int64_t system_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  std::int64_t start_ticks_;
  std::int64_t start_ns_;
  std::int64_t end_ticks_ = 0;
  std::int64_t end_ns_ = 0;
  bool frozen_ = false;
};

}  // namespace memscope::detail

// CascadePeak: exact nested and overlapping peak windows over a counter that keeps a single
// resettable peak, such as the kernel's VmHWM (reset through /proc/self/clear_refs) or
// PyTorch's max_memory_allocated (reset_peak_memory_stats).
//
// The cascade rule (docs/design.md) applied to such a counter: before every reset of
// the counter's peak (when a window opens, and in reset_peak()) the peak so far is folded into
// the innermost open window, so the counter's peak only ever covers time inside every open
// window. A window's peak is then the maximum of its PeakWindows peak and the counter's peak
// now; when it closes, PeakWindows folds its record into the window below it. The counter's
// peak is never folded on close: it stays where it is and still covers only time inside every
// window that remains open. Exact as long as nothing else resets the counter's peak.
//
// The counter (a template parameter, so probes pay no indirection and no allocation):
//   std::int64_t current();                      the value now
//   std::int64_t peak();                         the highest value since the last reset
//   void reset_peak();                           sets the peak to the value now
// and optionally
//   std::int64_t peak_at_least(std::int64_t k);  max(k, peak()), for counters with a cheap
//                                                upper bound that can often skip peak()
// Each may throw; open(), read() and reset_peak() pass the error on with every window still
// consistent, close() never throws.
//
// Not synchronised: the owner calls it under its own lock, as with PeakWindows. Ownership:
// windows are owned by the caller and must be closed before they are destroyed.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <exception>
#include <utility>

#include "memscope/peak_windows.hpp"

namespace memscope {

template <class Counter>
concept PeakCounter = requires(Counter& c) {
  { c.current() } -> std::convertible_to<std::int64_t>;
  { c.peak() } -> std::convertible_to<std::int64_t>;
  c.reset_peak();
};

template <PeakCounter Counter>
class CascadePeak {
 public:
  using Windows = PeakWindows<1>;
  using Window = Windows::Window;
  struct Reading {
    std::int64_t current = 0;
    std::int64_t peak = 0;
  };

  explicit CascadePeak(Counter counter) : counter_(std::move(counter)) {}

  // Opens `w` as the innermost window; returns the counter's value now, its begin.
  std::int64_t open(Window& w) {
    const std::int64_t now = current();
    fold_peak_into_innermost(now);
    counter_.reset_peak();
    windows_.open(w, {now});
    return now;
  }

  // The value now and the peak since `w` opened; `w` stays open.
  Reading read(const Window& w) {
    const std::int64_t now = current();
    windows_.observe(0, now);
    return {now, peak_at_least(windows_.peak(w)[0])};
  }

  // Closes `w`. If the counter fails, `w` closes with what was seen until then (the last value
  // read, on any window) and the error goes to `*error` when given.
  Reading close(Window& w, std::exception_ptr* error = nullptr) noexcept {
    Reading r{last_current_, 0};
    bool read_ok = true;
    try {
      r.current = current();
      windows_.observe(0, r.current);
    } catch (...) {
      read_ok = false;
      if (error != nullptr) *error = std::current_exception();
    }
    r.peak = windows_.close(w)[0];
    if (read_ok) {
      try {
        r.peak = peak_at_least(r.peak);
      } catch (...) {
        if (error != nullptr) *error = std::current_exception();
      }
    }
    return r;
  }

  // Resets the counter's peak without losing it for the open windows.
  void reset_peak() {
    fold_peak_into_innermost(current());
    counter_.reset_peak();
  }

  // Folds the counter's peak so far into the innermost open window without resetting it (for a
  // copy of the state that will see the counter start afresh, as a forked child does).
  void fold_peak() {
    if (!windows_.empty()) fold_peak_into_innermost(current());
  }

  [[nodiscard]] bool empty() const noexcept { return windows_.empty(); }
  [[nodiscard]] Counter& counter() noexcept { return counter_; }

 private:
  std::int64_t current() {
    last_current_ = static_cast<std::int64_t>(counter_.current());
    return last_current_;
  }

  std::int64_t peak_at_least(std::int64_t known) {
    if constexpr (requires { counter_.peak_at_least(known); }) {
      return static_cast<std::int64_t>(counter_.peak_at_least(known));
    } else {
      return std::max(known, static_cast<std::int64_t>(counter_.peak()));
    }
  }

  // Before the counter's peak is reset its value must live on in a window, or the windows
  // open now would lose the peak it holds.
  void fold_peak_into_innermost(std::int64_t now) {
    const Window* top = windows_.innermost();
    if (top == nullptr) return;
    windows_.observe(0, peak_at_least(std::max(top->record[0], now)));
  }

  Counter counter_;
  Windows windows_;
  std::int64_t last_current_ = 0;
};

}  // namespace memscope

// PeakWindows: any number of independent peak windows over N counters, exact and O(1) per
// counter change however many windows are open.
//
// The cascade rule (docs/design.md): each open window keeps the running maximum of
// the counters since it opened, but only the innermost (most recently opened) window is updated
// on a change. A window's peak is therefore the maximum of its own record and those of every
// window opened after it that is still open. When a window closes, its record is folded into
// the window directly below it, so nothing is lost; windows may close in any order, and closing
// a window that is not innermost leaves the inner ones in place.
//
// Not synchronised: the owner (an allocator, a probe) calls it under its own lock.
// Ownership: windows are owned by the caller (usually inside an RAII scope object) and must be
// closed before they are destroyed.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

namespace memscope {

template <std::size_t N>
class PeakWindows {
 public:
  using Values = std::array<std::int64_t, N>;

  struct Window {
    Window* below = nullptr;
    Window* above = nullptr;
    Values begin{};   // counters when the window opened
    Values record{};  // running maximum kept by this window itself
    bool open = false;
  };

  // Opens `w` as the new innermost window, starting from `current`.
  void open(Window& w, const Values& current) noexcept {
    w.begin = current;
    w.record = current;
    w.open = true;
    w.above = nullptr;
    w.below = top_;
    if (top_ != nullptr) top_->above = &w;
    top_ = &w;
  }

  // Records the counters after a change. Only the innermost window is touched.
  void observe(const Values& current) noexcept {
    if (top_ == nullptr) return;
    for (std::size_t i = 0; i < N; ++i) top_->record[i] = std::max(top_->record[i], current[i]);
  }
  // Records one counter after a change.
  void observe(std::size_t index, std::int64_t current) noexcept {
    if (top_ != nullptr) top_->record[index] = std::max(top_->record[index], current);
  }

  // The maximum of every counter since `w` opened (w must be open).
  [[nodiscard]] Values peak(const Window& w) const noexcept {
    Values result = w.record;
    for (const Window* x = w.above; x != nullptr; x = x->above) {
      for (std::size_t i = 0; i < N; ++i) result[i] = std::max(result[i], x->record[i]);
    }
    return result;
  }

  // Closes `w`, folding its record into the window below it, and returns its final peak.
  Values close(Window& w) noexcept {
    Values result = peak(w);
    if (w.below != nullptr) {
      for (std::size_t i = 0; i < N; ++i)
        w.below->record[i] = std::max(w.below->record[i], w.record[i]);
      w.below->above = w.above;
    }
    if (w.above != nullptr) {
      w.above->below = w.below;
    } else {
      top_ = w.below;
    }
    w.below = w.above = nullptr;
    w.open = false;
    w.record = result;
    return result;
  }

  [[nodiscard]] bool empty() const noexcept { return top_ == nullptr; }
  [[nodiscard]] Window* innermost() const noexcept { return top_; }

 private:
  Window* top_ = nullptr;
};

}  // namespace memscope

// PeakScope: an independent peak window on a CachingAllocator.
//
// Opened by CachingAllocator::peak_scope(); peak() gives the highest allocated, reserved,
// active and requested bytes seen since the scope opened. Any number of scopes may be open,
// nested or overlapping, and closed in any order; none is disturbed by reset_peak_stats() or by
// another scope, and each costs O(1) per allocation (docs/design.md).
//
// Thread safety: a scope may be read and closed from any thread. Ownership: RAII; the scope
// closes when destroyed and must not outlive its allocator. Movable, not copyable.
#pragma once

#include <cstdint>
#include <memory>

#include "memscope/peak_windows.hpp"

namespace memscope {

class CachingAllocator;

struct PeakValues {
  std::int64_t allocated_bytes = 0;
  std::int64_t reserved_bytes = 0;
  std::int64_t active_bytes = 0;
  std::int64_t requested_bytes = 0;
  friend bool operator==(const PeakValues&, const PeakValues&) = default;
};

class PeakScope {
 public:
  PeakScope(PeakScope&& other) noexcept = default;
  PeakScope& operator=(PeakScope&& other) noexcept;
  PeakScope(const PeakScope&) = delete;
  PeakScope& operator=(const PeakScope&) = delete;
  ~PeakScope() noexcept { close(); }

  // The peak since the scope opened (frozen at its final value once closed).
  [[nodiscard]] PeakValues peak() const;
  // The counters when the scope opened.
  [[nodiscard]] PeakValues begin() const noexcept;
  [[nodiscard]] bool is_open() const noexcept { return window_ && window_->open; }
  // Closes the scope now; peak() keeps its final value. Idempotent.
  void close() noexcept;

  using Windows = PeakWindows<4>;

 private:
  friend class CachingAllocator;
  PeakScope(CachingAllocator* owner, std::unique_ptr<Windows::Window> window)
      : owner_(owner), window_(std::move(window)) {}

  CachingAllocator* owner_ = nullptr;
  std::unique_ptr<Windows::Window> window_;  // heap node: its address stays fixed across moves
};

}  // namespace memscope

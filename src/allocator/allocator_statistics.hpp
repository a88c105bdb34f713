// AllocatorStatistics: the allocator core's statistics in PyTorch's vocabulary (allocation,
// segment, active, inactive_split, their bytes, requested_bytes, the oversize and num_* counters),
// their peaks, the peak windows of PeakScope, and their resets. A value member of AllocatorCore,
// which tells it what happened (an allocation, a free, a segment reserved, a block waiting for
// stream events); it owns how each figure is kept and derived. Not synchronised (the core's
// caller locks). Its inline members are the hit path's: they call nothing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "memscope/errors.hpp"
#include "memscope/peak_scope.hpp"
#include "memscope/stats.hpp"

namespace memscope::detail {

inline constexpr std::size_t kAllPools = static_cast<std::size_t>(StatPool::all);
[[nodiscard]] inline std::size_t pool_index(bool small) noexcept {
  return static_cast<std::size_t>(small ? StatPool::small : StatPool::large);
}
[[nodiscard]] inline std::int64_t signed_size(std::size_t n) noexcept {
  return static_cast<std::int64_t>(n);
}

class AllocatorStatistics {
 public:
  // `max_split_size`: the setting (AllocatorConfig::kUnlimited when unset); blocks and segments
  // this big count as oversize.
  explicit AllocatorStatistics(std::size_t max_split_size) noexcept;

  // --- What happened to a block (`pool`: Block::stat_pool(), the hit path's index) ---------
  // Handed out: allocation, allocated_bytes and requested_bytes rise.
  void count_allocation(std::size_t pool, std::size_t size, std::size_t requested) noexcept {
    increase_in(kept_.allocation, pool, 1);
    increase_in(kept_.allocated_bytes, pool, signed_size(size));
    increase_in(kept_.requested_bytes, pool, signed_size(requested));
    if (size >= max_split_size_) kept_.oversize_allocations.increase(1);
  }
  // Freed by the caller (it may still wait for streams: active keeps it, see kept_).
  void uncount_allocation(std::size_t pool, std::size_t size) noexcept {
    decrease_in(kept_.allocation, pool, 1);
    decrease_in(kept_.allocated_bytes, pool, signed_size(size));
    if (size >= max_split_size_) --kept_.oversize_allocations.current;
  }
  // Leaves use (freed with no stream to wait for, or done waiting): its requested bytes go.
  void uncount_requested(std::size_t pool, std::size_t requested) noexcept {
    decrease_in(kept_.requested_bytes, pool, signed_size(requested));
  }
  // Whether freed blocks wait for stream events: only then may active pass allocation's peak.
  [[nodiscard]] bool blocks_wait() const noexcept { return waiting_[kAllPools].current != 0; }
  // An allocation while blocks wait: active may pass allocation's peak (see waiting_).
  [[gnu::cold, gnu::noinline]] void note_active_peaks(bool small) noexcept;
  // A freed block waits for its streams' events (it stays active), and stops waiting.
  void start_waiting(bool small, std::size_t size) noexcept;
  void stop_waiting(bool small, std::size_t size) noexcept;
  // A free block that shares its segment with others appears (+1) or goes (-1): inactive_split.
  void change_split(bool small, std::int64_t blocks, std::int64_t bytes) noexcept;

  // --- What happened to memory from the backend -------------------------------------------
  // A fixed segment reserved, and released.
  void count_segment(bool small, std::size_t size) noexcept;
  void uncount_segment(bool small, std::size_t size) noexcept;
  // Expandable segments: `bytes` mapped (unmapped when negative) and `ranges` contiguous mapped
  // runs more (fewer): reserved_bytes and segment.
  void change_mapped(bool small, std::int64_t bytes, std::int64_t ranges) noexcept;
  void count_device_alloc() noexcept { ++kept_.num_device_alloc; }
  void count_device_free() noexcept { ++kept_.num_device_free; }
  void count_alloc_retry() noexcept { ++kept_.num_alloc_retries; }
  // An allocation of `requested` bytes refused: counted, and the figures for its message.
  [[nodiscard]] OutOfMemoryError::Figures count_oom(std::size_t requested, std::size_t capacity,
                                                    std::size_t device_free,
                                                    std::size_t limit) noexcept;
  void count_sync_all_streams() noexcept { ++kept_.num_sync_all_streams; }
  void count_invalid_free() noexcept { ++kept_.num_invalid_frees; }

  // --- Figures ------------------------------------------------------------------------------
  [[nodiscard]] std::int64_t allocated_bytes(StatPool pool = StatPool::all) const noexcept {
    return kept_.allocated_bytes[static_cast<std::size_t>(pool)].current;
  }
  [[nodiscard]] std::int64_t reserved_bytes(StatPool pool = StatPool::all) const noexcept {
    return kept_.reserved_bytes[static_cast<std::size_t>(pool)].current;
  }
  [[nodiscard]] std::int64_t segments() const noexcept { return kept_.segment[kAllPools].current; }
  [[nodiscard]] std::size_t live_allocations() const noexcept {
    return static_cast<std::size_t>(kept_.allocation[kAllPools].current);
  }
  // The allocator's clock, which ages cached blocks for gc: allocations made so far. Derived
  // from allocation's cumulative count (so the hot path ticks nothing more), which
  // reset_accumulated() zeroes: what it had is kept in allocations_before_reset_.
  [[nodiscard]] std::uint64_t clock() const noexcept {
    return allocations_before_reset_ +
           static_cast<std::uint64_t>(kept_.allocation[kAllPools].allocated);
  }
  // Frees made so far, the hot path's too (allocations made minus those live); unlike the
  // cumulative counters, reset_accumulated() leaves it alone.
  [[nodiscard]] std::uint64_t frees() const noexcept { return clock() - live_allocations(); }
  // Every statistic as users read it: freed and active derived (see kept_).
  [[nodiscard]] MemoryStats report() const noexcept;
  void reset_peaks() noexcept;
  void reset_accumulated() noexcept;

  // --- Peak windows (PeakScope) -------------------------------------------------------------
  [[nodiscard]] PeakScope::Windows::Values peak_counters() const noexcept;
  [[nodiscard]] const PeakScope::Windows& windows() const noexcept { return windows_; }
  [[nodiscard]] bool has_windows() const noexcept { return !windows_.empty(); }
  void open_window(PeakScope::Windows::Window& window) noexcept;
  void close_window(PeakScope::Windows::Window& window) noexcept { windows_.close(window); }
  // After an allocation, with windows open: their peaks see the new figures.
  void observe_windows() noexcept { windows_.observe(peak_counters()); }

  // The "statistics" invariant (AllocatorCore::validate()): every current value equals
  // `expected` (what the blocks say), is not negative and is not above its peak. Throws
  // InternalError naming the figure.
  void check(const MemoryStats& expected) const { check_figures(report(), expected); }
  // check()'s test of figures as report() gives them (`live`), on its own so that tests can
  // break a figure no sequence of events could (a current above its peak).
  static void check_figures(const MemoryStats& live, const MemoryStats& expected);

 private:
  // Per-pool updates: `pool` is small_pool's or large_pool's index, besides all. decrease_in()
  // changes `current` only (see kept_).
  static void increase_in(StatArray& stat, std::size_t pool, std::int64_t amount) noexcept {
    stat[kAllPools].increase(amount);
    stat[pool].increase(amount);
  }
  static void decrease_in(StatArray& stat, std::size_t pool, std::int64_t amount) noexcept {
    stat[kAllPools].current -= amount;  // freed is derived (see kept_)
    stat[pool].current -= amount;
  }
  static void increase(StatArray& stat, bool small, std::int64_t amount) noexcept {
    increase_in(stat, pool_index(small), amount);
  }
  static void decrease(StatArray& stat, bool small, std::int64_t amount) noexcept {
    decrease_in(stat, pool_index(small), amount);
  }
  // Calls f(Stat&) on every Stat kept here: kept_ (families, single ones) and waiting_*.
  template <class F>
  void for_each_kept_stat(F&& f);

  std::size_t max_split_size_;
  // Every Stat here keeps in `freed` not the cumulative decrease but the value `current` had at
  // the last reset_accumulated() (0 before): freed = allocated - current + that, which report()
  // computes, so no decrease writes a second counter.
  // Every statistic but active and active_bytes, which report() derives: a block is active from
  // its allocation until it is cached, so active = allocation + waiting, where waiting counts
  // the blocks the caller freed whose streams' events are not done yet. The hot path, where
  // nothing waits, then updates neither active statistic (docs/design.md, "Hot path").
  MemoryStats kept_;
  StatArray waiting_;        // blocks (count)
  StatArray waiting_bytes_;  // their sizes
  // active's and active_bytes' peaks reached while blocks waited (else active == allocation,
  // whose own peak covers it), or their value at the last reset_peaks().
  std::array<std::int64_t, kStatPools> active_peak_{};
  std::array<std::int64_t, kStatPools> active_bytes_peak_{};
  std::uint64_t allocations_before_reset_ = 0;
  PeakScope::Windows windows_;
};

}  // namespace memscope::detail

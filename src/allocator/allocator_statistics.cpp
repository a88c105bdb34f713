#include "allocator/allocator_statistics.hpp"

#include <algorithm>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "allocator/invariant.hpp"
#include "memscope/config.hpp"

namespace memscope::detail {

namespace {

// A Stat as kept here (see kept_: `freed` holds the base) as users read it.
Stat reported(Stat kept) noexcept {
  kept.freed = kept.allocated - kept.current + kept.freed;
  return kept;
}

// An active statistic from its allocated counterpart and the waiting blocks' (see kept_):
// active rises only when a block is allocated, by the same amount, so the cumulative increase is
// the allocated one's; it falls when a block is freed without waiting, or stops waiting.
Stat derive_active(const Stat& allocated, const Stat& waiting, std::int64_t peak_while_waiting) {
  Stat active;
  active.current = allocated.current + waiting.current;
  active.allocated = allocated.allocated;
  active.freed = allocated.freed - waiting.allocated + waiting.freed;
  active.peak = std::max(allocated.peak, peak_while_waiting);
  return active;
}

}  // namespace

AllocatorStatistics::AllocatorStatistics(std::size_t max_split_size) noexcept
    : max_split_size_(max_split_size) {
  kept_.max_split_size =
      max_split_size == AllocatorConfig::kUnlimited ? -1 : signed_size(max_split_size);
}

template <class F>
void AllocatorStatistics::for_each_kept_stat(F&& f) {
  for (const StatFamily& family : kStatFamilies) {
    for (Stat& stat : kept_.*family.member) f(stat);
  }
  for (const SingleStat& single : kSingleStats) f(kept_.*single.member);
  for (StatArray* waiting : {&waiting_, &waiting_bytes_}) {
    for (Stat& stat : *waiting) f(stat);
  }
}

MemoryStats AllocatorStatistics::report() const noexcept {
  MemoryStats out = kept_;
  for (const StatFamily& family : kStatFamilies) {
    for (Stat& stat : out.*family.member) stat = reported(stat);
  }
  for (const SingleStat& single : kSingleStats) out.*single.member = reported(out.*single.member);
  for (std::size_t pool = 0; pool < kStatPools; ++pool) {
    out.active[pool] =
        derive_active(out.allocation[pool], reported(waiting_[pool]), active_peak_[pool]);
    out.active_bytes[pool] = derive_active(
        out.allocated_bytes[pool], reported(waiting_bytes_[pool]), active_bytes_peak_[pool]);
  }
  return out;
}

void AllocatorStatistics::reset_peaks() noexcept {
  kept_.reset_peak();
  for (std::size_t pool = 0; pool < kStatPools; ++pool) {
    active_peak_[pool] = kept_.allocation[pool].current + waiting_[pool].current;
    active_bytes_peak_[pool] = kept_.allocated_bytes[pool].current + waiting_bytes_[pool].current;
  }
}

void AllocatorStatistics::reset_accumulated() noexcept {
  allocations_before_reset_ = clock();  // the clock runs on
  kept_.reset_accumulated();            // the num_* counters too
  for_each_kept_stat([](Stat& stat) {
    stat.allocated = 0;
    stat.freed = stat.current;  // the base: freed counts from here
  });
}

void AllocatorStatistics::note_active_peaks(bool small) noexcept {
  for (const std::size_t pool : {kAllPools, pool_index(small)}) {
    active_peak_[pool] =
        std::max(active_peak_[pool], kept_.allocation[pool].current + waiting_[pool].current);
    active_bytes_peak_[pool] =
        std::max(active_bytes_peak_[pool],
                 kept_.allocated_bytes[pool].current + waiting_bytes_[pool].current);
  }
}

void AllocatorStatistics::start_waiting(bool small, std::size_t size) noexcept {
  increase(waiting_, small, 1);
  increase(waiting_bytes_, small, signed_size(size));
}

void AllocatorStatistics::stop_waiting(bool small, std::size_t size) noexcept {
  decrease(waiting_, small, 1);
  decrease(waiting_bytes_, small, signed_size(size));
}

void AllocatorStatistics::change_split(bool small, std::int64_t blocks,
                                       std::int64_t bytes) noexcept {
  if (blocks > 0) increase(kept_.inactive_split, small, blocks);
  if (blocks < 0) decrease(kept_.inactive_split, small, -blocks);
  if (bytes > 0) increase(kept_.inactive_split_bytes, small, bytes);
  if (bytes < 0) decrease(kept_.inactive_split_bytes, small, -bytes);
}

OutOfMemoryError::Figures AllocatorStatistics::count_oom(std::size_t requested,
                                                         std::size_t capacity,
                                                         std::size_t device_free,
                                                         std::size_t limit) noexcept {
  ++kept_.num_ooms;
  OutOfMemoryError::Figures oom;
  oom.requested = requested;
  oom.capacity = capacity;
  oom.device_free = device_free;
  oom.allocated = static_cast<std::size_t>(allocated_bytes());
  oom.reserved = static_cast<std::size_t>(reserved_bytes());
  oom.limit = limit;
  return oom;
}

void AllocatorStatistics::count_segment(bool small, std::size_t size) noexcept {
  increase(kept_.segment, small, 1);
  increase(kept_.reserved_bytes, small, signed_size(size));
  if (size >= max_split_size_) kept_.oversize_segments.increase(1);
  ++kept_.num_device_alloc;
}

void AllocatorStatistics::uncount_segment(bool small, std::size_t size) noexcept {
  decrease(kept_.segment, small, 1);
  decrease(kept_.reserved_bytes, small, signed_size(size));
  if (size >= max_split_size_) --kept_.oversize_segments.current;
  ++kept_.num_device_free;
}

void AllocatorStatistics::change_mapped(bool small, std::int64_t bytes,
                                        std::int64_t ranges) noexcept {
  if (bytes > 0) increase(kept_.reserved_bytes, small, bytes);
  if (bytes < 0) decrease(kept_.reserved_bytes, small, -bytes);
  if (ranges > 0) increase(kept_.segment, small, ranges);
  if (ranges < 0) decrease(kept_.segment, small, -ranges);
}

PeakScope::Windows::Values AllocatorStatistics::peak_counters() const noexcept {
  return {kept_.allocated_bytes[kAllPools].current, kept_.reserved_bytes[kAllPools].current,
          kept_.allocated_bytes[kAllPools].current + waiting_bytes_[kAllPools].current,
          kept_.requested_bytes[kAllPools].current};
}

void AllocatorStatistics::open_window(PeakScope::Windows::Window& window) noexcept {
  windows_.open(window, peak_counters());
}

void AllocatorStatistics::check_figures(const MemoryStats& live, const MemoryStats& expected) {
  // `pool` is "" for statistics kept once.
  const auto check_one = [](std::string_view name, std::string_view pool, const Stat& live,
                            std::int64_t want) {
    const std::string_view dot = pool.empty() ? "" : ".";
    if (live.current != want) {
      broken_invariant("statistics", fmt::format("{}{}{}.current is {}, the blocks say {}", name,
                                                 dot, pool, live.current, want));
    }
    if (live.current < 0 || live.current > live.peak) {
      broken_invariant("statistics", fmt::format("{}{}{}: current {} is negative or above peak {}",
                                                 name, dot, pool, live.current, live.peak));
    }
  };
  for (const StatFamily& family : kStatFamilies) {
    for (std::size_t pool = 0; pool < kStatPools; ++pool) {
      check_one(family.name, kStatPoolNames[pool], (live.*family.member)[pool],
                (expected.*family.member)[pool].current);
    }
  }
  check_one("oversize_allocations", "", live.oversize_allocations,
            expected.oversize_allocations.current);
  check_one("oversize_segments", "", live.oversize_segments, expected.oversize_segments.current);
}

}  // namespace memscope::detail

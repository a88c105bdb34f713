// MemoryStats: the caching allocator's statistics, in the vocabulary of torch.cuda.memory_stats()
// so numbers can be compared with PyTorch's and read by the same dashboards.
//
// Each Stat has current, peak, allocated (cumulative increase) and freed (cumulative decrease),
// kept for the whole allocator (all) and per pool (small_pool: blocks <= 1 MiB, large_pool).
// Invariants: current <= peak; current == allocated - freed when no reset intervened.
// Plain value types: copy them freely; not synchronised on their own.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace memscope {

struct Stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;
  std::int64_t freed = 0;

  void increase(std::int64_t amount) noexcept {
    current += amount;
    allocated += amount;
    if (current > peak) peak = current;
  }
  void decrease(std::int64_t amount) noexcept {
    current -= amount;
    freed += amount;
  }
  void reset_peak() noexcept { peak = current; }
  void reset_accumulated() noexcept { allocated = freed = 0; }
  friend bool operator==(const Stat&, const Stat&) = default;
};

enum class StatPool : std::size_t { all = 0, small = 1, large = 2 };
inline constexpr std::size_t kStatPools = 3;
using StatArray = std::array<Stat, kStatPools>;

struct MemoryStats {
  StatArray allocation;                // live allocations (count)
  StatArray segment;                   // segments reserved from the backend (count)
  StatArray active;                    // allocated, or freed but waiting on a stream (count)
  StatArray inactive_split;            // free blocks inside segments that hold other blocks (count)
  StatArray allocated_bytes;           // sizes of live allocations, rounded as the allocator did
  StatArray reserved_bytes;            // bytes of all segments
  StatArray active_bytes;              // bytes of active blocks
  StatArray inactive_split_bytes;      // bytes of inactive split blocks
  StatArray requested_bytes;           // request sizes of active blocks, as the caller asked
  Stat oversize_allocations;           // live allocations of at least max_split_size
  Stat oversize_segments;              // segments of at least max_split_size
  std::int64_t num_alloc_retries = 0;  // times every cached segment was released to retry
  std::int64_t num_ooms = 0;           // OutOfMemoryErrors thrown
  std::int64_t num_sync_all_streams = 0;  // waits for every pending stream event
  std::int64_t num_device_alloc = 0;      // segments reserved from the backend
  std::int64_t num_device_free = 0;       // segments released to the backend
  std::int64_t num_invalid_frees = 0;     // frees of pointers that were not live (ignored)
  std::int64_t max_split_size = -1;       // the setting; -1 when unlimited (as torch prints it)

  // Sets every peak to its current value; nothing else changes.
  void reset_peak() noexcept;
  // Zeroes every allocated/freed total and the num_* counters; current and peak stay.
  void reset_accumulated() noexcept;
  // The flat map torch.cuda.memory_stats() returns: "allocated_bytes.all.current", ...
  [[nodiscard]] std::map<std::string, std::int64_t> flatten() const;

  friend bool operator==(const MemoryStats&, const MemoryStats&) = default;
};

}  // namespace memscope

// MemoryStats: the caching allocator's statistics, in the vocabulary of torch.cuda.memory_stats()
// so numbers can be compared with PyTorch's and read by the same dashboards.
//
// Each Stat has current, peak, allocated (cumulative increase) and freed (cumulative decrease),
// kept for the whole allocator (all) and per pool (small_pool: blocks <= 1 MiB, large_pool).
// Invariants: current <= peak; current == allocated - freed when no reset intervened.
// Plain value types: copy them freely; not synchronised on their own.
//
// The tables at the end (kStatFamilies, kSingleStats, kStatCounters) are the one list of what
// MemoryStats holds: memory_stats() keys, memory_summary() rows, the resets and the tests all
// iterate them, and a static_assert fails when a member is added to MemoryStats but not to them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

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
// The pools' names in memory_stats() keys, indexed by StatPool.
inline constexpr std::array<std::string_view, kStatPools> kStatPoolNames{"all", "small_pool",
                                                                         "large_pool"};

// The fields of a Stat, in the order keys and summary columns show them.
struct StatField {
  std::string_view name;  // "current": the last part of a memory_stats() key
  std::int64_t Stat::*member;
};
inline constexpr std::array<StatField, 4> kStatFields{{{"current", &Stat::current},
                                                       {"peak", &Stat::peak},
                                                       {"allocated", &Stat::allocated},
                                                       {"freed", &Stat::freed}}};

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

// A family of per-pool statistics: keys "<name>.<pool>.<field>" ("allocated_bytes.all.peak").
struct StatFamily {
  std::string_view name;
  StatArray MemoryStats::*member;
  bool in_bytes;                   // a byte count (memory_summary() shows it as "1.50 GiB")
  std::string_view summary_label;  // its rows in memory_summary()
};
// In the order of memory_summary()'s rows.
inline constexpr std::array<StatFamily, 9> kStatFamilies{{
    {"allocated_bytes", &MemoryStats::allocated_bytes, true, "Allocated memory"},
    {"active_bytes", &MemoryStats::active_bytes, true, "Active memory"},
    {"requested_bytes", &MemoryStats::requested_bytes, true, "Requested memory"},
    {"reserved_bytes", &MemoryStats::reserved_bytes, true, "Reserved memory"},
    {"inactive_split_bytes", &MemoryStats::inactive_split_bytes, true, "Non-releasable memory"},
    {"allocation", &MemoryStats::allocation, false, "Allocations"},
    {"active", &MemoryStats::active, false, "Active allocs"},
    {"segment", &MemoryStats::segment, false, "Reserved segments"},
    {"inactive_split", &MemoryStats::inactive_split, false, "Non-releasable allocs"},
}};

// A statistic kept once, not per pool: keys "<name>.<field>" ("oversize_segments.peak").
struct SingleStat {
  std::string_view name;
  Stat MemoryStats::*member;
  std::string_view summary_label;  // its row in memory_summary() (a count)
};
inline constexpr std::array<SingleStat, 2> kSingleStats{{
    {"oversize_allocations", &MemoryStats::oversize_allocations, "Oversize allocations"},
    {"oversize_segments", &MemoryStats::oversize_segments, "Oversize segments"},
}};

// An event counter (key "<name>"), zeroed by reset_accumulated().
struct StatCounter {
  std::string_view name;
  std::int64_t MemoryStats::*member;
  // memory_summary() shows the counters three to a line as "name: value"; the value is padded
  // to this width (0 for the last of a line).
  int summary_width;
};
inline constexpr std::array<StatCounter, 6> kStatCounters{{
    {"num_alloc_retries", &MemoryStats::num_alloc_retries, 6},
    {"num_ooms", &MemoryStats::num_ooms, 6},
    {"num_sync_all_streams", &MemoryStats::num_sync_all_streams, 0},
    {"num_device_alloc", &MemoryStats::num_device_alloc, 7},
    {"num_device_free", &MemoryStats::num_device_free, 5},
    {"num_invalid_frees", &MemoryStats::num_invalid_frees, 0},
}};

// A member added to MemoryStats must be added to a table above (max_split_size is a setting,
// shown by flatten() on its own). Holds because every member is 8-byte aligned: no padding.
static_assert(sizeof(MemoryStats) == kStatFamilies.size() * sizeof(StatArray) +
                                         kSingleStats.size() * sizeof(Stat) +
                                         (kStatCounters.size() + 1) * sizeof(std::int64_t),
              "MemoryStats has a member that kStatFamilies, kSingleStats or kStatCounters lacks");

}  // namespace memscope

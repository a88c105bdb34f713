// Every size rule of the caching allocator, in one place (docs/size-rules.md explains them).
//
// Requests are rounded to 512 bytes (or to power-of-two divisions when configured). Blocks of
// up to 1 MiB come from the small pool, carved out of 2 MiB segments; bigger blocks come from
// the large pool: 20 MiB segments for requests under 10 MiB, and segments rounded up to 2 MiB
// for anything larger. A block is split only inside its segment, small blocks when at least
// 512 bytes would remain, large ones when more than 1 MiB would remain and the request is below
// max_split_size (oversize blocks are never split).
#pragma once

#include <cstddef>

#include "memscope/config.hpp"
#include "memscope/units.hpp"

namespace memscope::detail {

inline constexpr std::size_t kMinBlockSize = 512;        // alignment and smallest block
inline constexpr std::size_t kSmallSize = 1 * MiB;       // largest small-pool block
inline constexpr std::size_t kSmallBuffer = 2 * MiB;     // small-pool segment size
inline constexpr std::size_t kMinLargeAlloc = 10 * MiB;  // below: one 20 MiB segment
inline constexpr std::size_t kLargeBuffer = 20 * MiB;    // segment size for 1-10 MiB
inline constexpr std::size_t kRoundLarge = 2 * MiB;      // granularity above 10 MiB
// Requests above this cannot be rounded without overflow; no backend has this much memory.
inline constexpr std::size_t kLargestRequest = std::size_t{1} << 62;

// `size` rounded up to a multiple of `granularity` (no overflow check: callers bound `size`).
[[nodiscard]] inline std::size_t round_up(std::size_t size, std::size_t granularity) noexcept {
  return (size + granularity - 1) / granularity * granularity;
}

// The block size a request of `size` bytes (1 <= size <= kLargestRequest) occupies.
[[nodiscard]] std::size_t round_size(std::size_t size, const AllocatorConfig& config) noexcept;

// round_size() when roundup_power2_divisions is off everywhere: the hot path's common case.
[[nodiscard]] inline std::size_t round_size_plain(std::size_t size) noexcept {
  return size <= kMinBlockSize ? kMinBlockSize
                               : (size + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

// The segment size reserved on a cache miss for a block of `rounded` bytes.
[[nodiscard]] std::size_t segment_size(std::size_t rounded) noexcept;

[[nodiscard]] inline bool is_small(std::size_t rounded) noexcept {
  return rounded <= kSmallSize;
}

// Whether a free block of `block_size` bytes should be split to serve `rounded` bytes.
[[nodiscard]] bool should_split(std::size_t block_size, std::size_t rounded, bool small_pool,
                                std::size_t max_split_size) noexcept;

// Whether a cached block of `block_size` bytes may serve a request of `rounded` bytes: a normal
// request must not take an oversize block (it would pin it unsplit), and an oversize request may
// take a bigger oversize block only if the waste stays under kLargeBuffer.
[[nodiscard]] bool may_serve(std::size_t block_size, std::size_t rounded,
                             std::size_t max_split_size) noexcept;

// How the allocator core rounds, places and splits blocks under its settings.
struct PlacementRules {
  explicit PlacementRules(const AllocatorConfig& config) noexcept;
  std::size_t split_limit;     // blocks this big are never split: max_split_size (see the ctor)
  bool split_every_remainder;  // expandable segments: large blocks split like small ones
  bool places_by_address;      // expandable segments whose pages move: SegmentSource::place()
  bool rounds_to_divisions;    // any roundup_power2_divisions > 1: else plain 512-byte rounding
};

}  // namespace memscope::detail

#include "allocator/size_rules.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>

namespace memscope::detail {
namespace {

// Rounds up to the next of `divisions` equal steps between two powers of two: with 4 divisions
// a 1200 MiB request (between 1024 and 2048 MiB) becomes 1280 MiB. Fewer distinct sizes means
// freed blocks fit later requests more often, at the price of some internal waste.
std::size_t round_to_division(std::size_t size, std::uint32_t divisions) noexcept {
  if (std::has_single_bit(size)) return size;
  const std::size_t floor = std::bit_floor(size);
  const std::size_t step = floor / divisions;
  if (step == 0) return floor << 1;
  const std::size_t rounded_down = size & ~(step - 1);
  return rounded_down == size ? size : rounded_down + step;
}

}  // namespace

std::size_t round_size(std::size_t size, const AllocatorConfig& config) noexcept {
  const std::uint32_t divisions = config.divisions_for(size);
  if (divisions > 1 && size > kMinBlockSize * divisions) return round_to_division(size, divisions);
  return round_size_plain(size);
}

std::size_t segment_size(std::size_t rounded) noexcept {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return round_up(rounded, kRoundLarge);
}

bool should_split(std::size_t block_size, std::size_t rounded, bool small_pool,
                  std::size_t max_split_size) noexcept {
  const std::size_t remaining = block_size - rounded;
  if (small_pool) return remaining >= kMinBlockSize;
  return rounded < max_split_size && remaining > kSmallSize;
}

bool may_serve(std::size_t block_size, std::size_t rounded, std::size_t max_split_size) noexcept {
  if (rounded < max_split_size && block_size >= max_split_size) return false;
  if (rounded >= max_split_size && block_size >= rounded + kLargeBuffer) return false;
  return true;
}

PlacementRules::PlacementRules(const AllocatorConfig& config) noexcept
    // With expandable segments free pages are unmapped or recycled, so the fragmentation
    // max_split_size guards against cannot pin memory: every block may be split and reused
    // (applied, it made PyTorch grow to 14 GiB reserved for 300 MiB live, issue #123548).
    : split_limit(config.expandable_segments ? AllocatorConfig::kUnlimited : config.max_split_size),
      // A split remainder no longer strands memory in a segment (its pages can be unmapped),
      // so, as PyTorch does with expandable segments, every remainder of 512 bytes is split off.
      split_every_remainder(config.expandable_segments),
      places_by_address(config.expandable_segments &&
                        (config.page_recycling == AllocatorConfig::PageRecycling::above_peak ||
                         config.page_recycling == AllocatorConfig::PageRecycling::always)),
      rounds_to_divisions(std::any_of(config.roundup_power2_divisions.begin(),
                                      config.roundup_power2_divisions.end(),
                                      [](std::uint32_t d) { return d > 1; })) {}

}  // namespace memscope::detail

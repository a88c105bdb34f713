#include "allocator/size_rules.hpp"

#include <bit>

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

}  // namespace memscope::detail

// Placement by address space, for expandable segments whose free pages move (page recycling
// above_peak or always; docs/design.md, "Expandable segments").
//
// Why: with pages that move, what a segment reserves at any moment is the pages that live
// blocks touch (a mapping grows only when no whole free page is left to move). Best fit among
// cached blocks alone (PyTorch's rule) depends on which free space happens to be mapped: in the
// second iteration of a training step the cache holds the first iteration's pages, scattered by
// recycling, so the step's blocks land elsewhere than in the first, leave free space in more
// pieces, each with partial pages at its ends, and the reserved peak creeps up iteration after
// iteration (gpt2-small compiled: 1.0019 -> 1.0068 over 10). Here placement looks at
// free address space only: runs of cached and unmapped blocks count alike, so an iteration
// that starts from the same free address space places every block where the one before did,
// and reserves what it did. Inside a run that is one cached block, the block goes to the end
// when that leaves the rest more whole pages than its start would (back_keeps_more_pages).
#include "allocator/allocator_core.hpp"

namespace memscope {

using detail::Block;
using detail::Segment;

namespace {

bool is_free(const Block* b) noexcept {
  return b != nullptr && (b->cached || b->unmapped);
}

// Whole pages of `segment` inside [from, to).
std::size_t whole_pages(const Segment& segment, std::uintptr_t from, std::uintptr_t to) noexcept {
  const std::size_t first = (from - segment.base + segment.page - 1) / segment.page;
  const std::size_t end = (to - segment.base) / segment.page;
  return end > first ? end - first : 0;
}

// Whether a block of `rounded` bytes at the end of free block `b` leaves more whole free pages
// in what remains of it than one at its start: those pages can move where a growth needs them,
// while the partial pages at the ends of a free run stay mapped for nothing.
bool back_keeps_more_pages(const Block& b, std::size_t rounded) noexcept {
  const Segment& s = *b.segment;
  const std::uintptr_t end = b.address + b.size;
  return whole_pages(s, b.address, end - rounded) > whole_pages(s, b.address + rounded, end);
}

}  // namespace

// Splits cached block `b` (out of its bins) so that its last `rounded` bytes become the block
// handed out; the front stays cached.
Block* AllocatorCore::split_off_back(Block* b, std::size_t rounded) {
  count_split(b, -1);
  Block* back = block_recycler_.acquire();
  back->address = b->address + b->size - rounded;
  back->size = rounded;
  back->segment = b->segment;
  back->prev = b;
  back->next = b->next;
  if (b->next != nullptr) b->next->prev = back;
  b->next = back;
  b->size -= rounded;
  back->cached_at = b->cached_at;
  count_split(b, +1);
  count_split(back, +1);  // hand_out() uncounts it as the cached block it was
  cache_in_bins(b);
  return back;
}

Block* AllocatorCore::place_by_address(StreamPools& pools, bool small, std::size_t rounded) {
  Segment* const growing = expandable_segment(pools, small, rounded);
  if (growing == nullptr) return nullptr;
  detail::FreeBins& bins = small ? pools.small : pools.large;
  // Best fit among the runs that end before the end of the growing range (smallest, then
  // lowest address); the run reaching that end only when none fits. A range too full for the
  // request (reserved under a lower limit) has none: grow() then opens another.
  Block* best = nullptr;
  std::size_t best_bytes = 0;
  Block* open_end = nullptr;
  const auto consider = [&](Block* start) {
    if (is_free(start->prev)) return;  // not the first block of its run
    std::size_t bytes = 0;
    const Block* b = start;
    for (; is_free(b); b = b->next) bytes += b->size;
    if (bytes < rounded) return;
    if (b == nullptr && start->segment == growing) {
      open_end = start;
    } else if (best == nullptr || bytes < best_bytes ||
               (bytes == best_bytes && start->address < best->address)) {
      best = start;
      best_bytes = bytes;
    }
  };
  bins.for_each(0, consider);
  for (Block* u = growing->unmapped_first; u != nullptr; u = u->bin_next) consider(u);
  Block* const start = best != nullptr ? best : open_end;
  if (start == nullptr) return nullptr;
  if (start->cached && start->size >= rounded) {
    bins.remove(start);
    if (start->size > rounded && back_keeps_more_pages(*start, rounded)) {
      return split_off_back(start, rounded);
    }
    return start;
  }
  Block* last = start;
  for (std::size_t bytes = start->size; bytes < rounded; bytes += last->size) last = last->next;
  return grow_run(start->segment, start, last, rounded);
}

}  // namespace memscope

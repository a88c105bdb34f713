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
// and reserves what it did.
#include "allocator/allocator_core.hpp"

namespace memscope {

using detail::Block;
using detail::Segment;

namespace {

bool is_free(const Block* b) noexcept {
  return b != nullptr && (b->cached || b->unmapped);
}

}  // namespace

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
    return start;
  }
  Block* last = start;
  for (std::size_t bytes = start->size; bytes < rounded; bytes += last->size) last = last->next;
  return grow_run(start->segment, start, last, rounded);
}

}  // namespace memscope

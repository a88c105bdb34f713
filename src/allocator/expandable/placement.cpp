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
// and reserves what it did. The block goes to the end of its run (but the run at the open end)
// when that leaves the rest more whole pages than its start would (back_keeps_more_pages),
// decided by the run's address space alone and carried out whatever of it is mapped
// (place_at_back).
#include "allocator/expandable/expandable_segments.hpp"
#include "allocator/front_cache.hpp"

namespace memscope::detail {

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

// Whether a block of `rounded` bytes at the end of the free run [from, from + bytes) leaves
// more whole free pages in what remains of it than one at its start: those pages can move
// where a growth needs them, while the partial pages at the ends of a free run stay mapped for
// nothing. The run's address space alone decides, not what of it is mapped: the first
// iteration of a step finds a run partly unmapped that the second finds mapped whole, and
// decided by mapping the two placed differently (random steps reserved up to 1.0674 of their
// live peak from the second iteration on, against 1.0068 in the first).
bool back_keeps_more_pages(const Segment& s, std::uintptr_t from, std::size_t bytes,
                           std::size_t rounded) noexcept {
  const std::uintptr_t end = from + bytes;
  return whole_pages(s, from, end - rounded) > whole_pages(s, from + rounded, end);
}

}  // namespace

// Splits cached block `b` (out of its bins) so that its last `rounded` bytes become the block
// handed out; the front stays cached.
Block* ExpandableSegments::split_off_back(Block* b, std::size_t rounded) {
  count_split(b, -1);
  Block* back = store_.split_at(b, b->address + b->size - rounded);
  back->cached_at = b->cached_at;
  count_split(b, +1);
  count_split(back, +1);  // hand_out() uncounts it as the cached block it was
  FrontCache::cache_in_bins(b);
  return back;
}

Block* ExpandableSegments::place(StreamPools& pools, bool small, std::size_t rounded) {
  Segment* const growing = expandable_segment(pools, small, rounded);
  if (growing == nullptr) return nullptr;
  FreeBins& bins = small ? pools.small : pools.large;
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
  if (best != nullptr && best_bytes > rounded &&
      back_keeps_more_pages(*start->segment, start->address, best_bytes, rounded)) {
    return place_at_back(start, best_bytes, rounded);
  }
  if (start->cached && start->size >= rounded) {
    bins.remove(start);
    return start;
  }
  Block* last = start;
  for (std::size_t bytes = start->size; bytes < rounded; bytes += last->size) last = last->next;
  return grow_run(start->segment, start, last, rounded);
}

Block* ExpandableSegments::place_at_back(Block* start, std::size_t run_bytes, std::size_t rounded) {
  Segment* const s = start->segment;
  const std::uintptr_t end = start->address + run_bytes;
  const std::uintptr_t at = end - rounded;
  const std::uintptr_t first_page = page_down(*s, at);
  // Blocks are found by address from `start`, which no change below merges away (the block
  // before a run is not free): unmapping and mapping merge and recycle the others.
  const auto block_at = [start](std::uintptr_t address) {
    Block* b = start;
    while (b->address + b->size <= address) b = b->next;
    return b;
  };
  Block* c = block_at(at);
  if (c->cached && c->address + c->size == end) {  // mapped already
    store_.prepare(1);
    s->bins->remove(c);
    return c->address == at ? c : split_off_back(c, rounded);
  }
  // The pages the block needs start at first_page. Whole free pages below it, in a cached block
  // the growth starts from or merges with, are given back first: kept, they would stay mapped
  // beside the block, where recycling does not look (it spares what a growth merges with), and
  // the next iteration, finding them elsewhere, mapped new pages (random steps: 1.0095 -> 1.0130
  // of the live peak from the second iteration on). An unmapped block starting below it is
  // split there.
  if (c->cached && page_up(*s, c->address) < first_page) {
    unmap_free_pages(c, first_page);
  } else if (c->unmapped && c->address == first_page && c->prev != nullptr && c->prev->cached) {
    unmap_free_pages(c->prev);
  }
  c = block_at(at);
  Block* from = c;
  if (c->unmapped && first_page > c->address) {
    store_.prepare(1);
    from = split_unmapped(c, first_page);
  }
  store_.prepare(1);
  Block* merged = grow_run(s, from, block_at(end - 1), end - from->address);
  if (merged == nullptr) {
    // At the limit: the split must not leave two unmapped blocks side by side.
    for (Block* b = start; b != nullptr && b->address < end;) {
      if (b->unmapped && b->next != nullptr && b->next->unmapped) {
        join_unmapped(b, b->next);
      } else {
        b = b->next;
      }
    }
    return nullptr;
  }
  store_.prepare(1);
  return merged->size > rounded ? split_off_back(merged, rounded) : merged;
}

}  // namespace memscope::detail

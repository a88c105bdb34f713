#include "allocator/front_cache.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "allocator/block_store.hpp"
#include "allocator/invariant.hpp"

namespace memscope::detail {

Block* FrontCache::make_room(RecentFrees& recent) noexcept {
  if (recent.count != recent.blocks.size()) return nullptr;
  Block* const oldest = recent.blocks[0];
  std::copy(recent.blocks.begin() + 1, recent.blocks.end(), recent.blocks.begin());
  --recent.count;
  return oldest;
}

bool FrontCache::keeps_fixed_placement(Block* block) noexcept {
  const auto marks =
      static_cast<std::uint8_t>(block->use.slow_free & (Block::kNextCached | Block::kPrevCached));
  if (marks == 0) return true;
  // Its previous neighbour cached: best fit splits the merged block at that neighbour's lower
  // address, where PyTorch's rules place the next allocation of this size (cs336-medium ctx128
  // at capacity: a 2 MiB block taken back above a cached 4 MiB one left a 20 MiB segment
  // holding a live block that PyTorch's rules had left free to release).
  if (block->prev != nullptr && block->prev->cached) return false;
  if ((marks & Block::kNextCached) == 0) {
    block->unmark_slow_free(Block::kPrevCached);
    return true;
  }
  // Its next neighbour cached beside other cached blocks: best fit merges the two and may find
  // a better fit among the others, placing the allocation elsewhere (octree-nca2d and cs336-xl
  // bf16 reserved more than PyTorch's rules). To the bins, then, where it merges.
  // With that block alone in the bins, best fit would split the merged block where the hit
  // takes it: the reason is gone until FreeBins caches a second block (mark_neighbours).
  const Block* next = block->next;
  if (next != nullptr && next->cached && block->segment->bins->count() != 1) return false;
  block->unmark_slow_free(marks);
  return true;
}

void FrontCache::mark_neighbours(const Block* block, const FreeBins& bins) noexcept {
  if (block->segment->expandable) return;
  if (block->prev != nullptr) block->prev->mark_slow_free(Block::kNextCached);
  if (block->next != nullptr) block->next->mark_slow_free(Block::kPrevCached);
  if (const Block* only = bins.only_block(); only != nullptr && only->prev != nullptr) {
    only->prev->mark_slow_free(Block::kNextCached);
  }
}

bool FrontCache::any(const BlockStore& store) noexcept {
  // Streams are few; a count of them all would cost the hot path an update at every hit.
  bool any = false;
  store.for_each_pools(
      [&any](StreamId, const StreamPools& pools) { any = any || pools.recent.count != 0; });
  return any;
}

void FrontCache::check(const BlockStore& store, std::vector<const Block*>& recent) const {
  std::vector<const Block*> listed;
  store.for_each_pools(
      [&](StreamId stream, const StreamPools& pools) { check(pools.recent, stream, listed); });
  std::sort(recent.begin(), recent.end());
  std::sort(listed.begin(), listed.end());
  if (recent != listed) {
    broken_invariant("recent",
                     fmt::format("{} recent blocks, {} listed", recent.size(), listed.size()));
  }
  if (bypassed_ && !recent.empty()) {
    broken_invariant("recent", fmt::format("{} recent blocks, but at capacity (tight_) every free "
                                           "goes to the bins",
                                           recent.size()));
  }
}

void FrontCache::check(const RecentFrees& recent, StreamId stream,
                       std::vector<const Block*>& listed) const {
  if (recent.count > recent.blocks.size()) {
    broken_invariant("recent",
                     fmt::format("stream {} lists {} recent blocks", stream, recent.count));
  }
  for (std::size_t i = 0; i < recent.count; ++i) {
    const Block* b = recent.blocks[i];
    if (b == nullptr || b->segment == nullptr || b->segment->recent != &recent) {
      broken_invariant("recent",
                       describe(b) + fmt::format(": listed as recent by stream {}", stream));
    }
    listed.push_back(b);
  }
}

void FrontCache::check_room(const Segment& s, const StreamPools* pools) {
  const bool grown =
      pools != nullptr && (pools->expandable_small == &s || pools->expandable_large == &s);
  const FrontCacheRoom want = s.expandable ? kClosedRoom : FrontCacheRoom{};
  if (!grown && (s.room.limit != want.limit || s.room.next != want.next)) {
    broken_invariant("front-cache", describe(&s) + fmt::format(": front-cache room {} below {:#x}",
                                                               s.room.limit, s.room.next));
  }
}

void FrontCache::check_rooms(StreamId stream, const StreamPools& pools) {
  for (const bool small : {true, false}) {
    const Segment* growing = small ? pools.expandable_small : pools.expandable_large;
    const FreeBins& bins = small ? pools.small : pools.large;
    const FrontCacheRoom want = bins.room_now();
    if (bins.kept_room() != (growing != nullptr ? &growing->room : nullptr) ||
        (growing != nullptr &&
         (growing->room.limit != want.limit || growing->room.next != want.next))) {
      broken_invariant("front-cache",
                       fmt::format("stream {}: the {} pool's front-cache room is not what "
                                   "its bins hold",
                                   stream, small ? "small" : "large"));
    }
  }
}

void FrontCache::check_marks(const Block& b, const Block* before) {
  const Segment& s = *b.segment;
  // A front-cache hit on it could place an allocation where best fit would not.
  if (!s.expandable && !b.cached && b.next != nullptr && b.next->cached && s.bins->count() > 1 &&
      (b.use.slow_free & Block::kNextCached) == 0) {
    broken_invariant("block-state", describe(&b) +
                                        ": its next neighbour is cached beside others, yet its "
                                        "free may take the hot path (kNextCached unset)");
  }
  if (!s.expandable && b.use.allocated && before != nullptr && before->cached &&
      (b.use.slow_free & Block::kPrevCached) == 0) {
    broken_invariant("block-state", describe(&b) +
                                        ": its previous neighbour is cached, yet its free may "
                                        "take the hot path (kPrevCached unset)");
  }
}

}  // namespace memscope::detail

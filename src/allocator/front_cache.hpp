// FrontCache: the hit path's cache in front of the free bins. Each stream's pools hold a
// RecentFrees list (block.hpp) of the blocks it freed a moment ago, unmerged; this component
// files blocks there and takes them back, evicts and flushes them (each flushed block passed,
// in the order it was freed, to the caller's merge(Block*), which merges it into its bins), and
// answers the placement question it asks the bins: would best fit, had the block been merged
// at its free, place the next allocation of its size where a hit does? It owns the lists'
// invariant ("recent") and whether the front cache is bypassed at capacity. A value member of
// AllocatorCore; its inline members are the hit path's and call nothing. Not synchronised.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_set>
#include <vector>

#include "allocator/block.hpp"
#include "allocator/block_store.hpp"
#include "allocator/free_bins.hpp"

namespace memscope::detail {

class FrontCache {
 public:
  // At capacity (fixed segments), once a new segment has been refused (the memory limit or the
  // device is full, and cached segments are about to be released), every free goes to the bins,
  // merged at once: the front cache's unmerged blocks made the smallest device that fits bigger
  // than PyTorch's. (Best fit takes the lowest address among blocks of its size, as PyTorch's
  // rules do, at capacity or not; with expandable segments only from there on.) Entering it
  // when reserved passed half the limit fitted all 15 traces of the corpus within PyTorch's (at
  // the limit: 12, each within 0.03 GB; with the lowest-address ties and kPrevCached, all 15),
  // but a job that reserves more than half the device, most training jobs, then paid 600-800
  // instructions per hit pair instead of 149. The core's miss path bypasses it before its
  // release-and-retry; empty_cache() below half the limit opens the front cache again.
  [[nodiscard]] bool bypassed() const noexcept { return bypassed_; }
  void bypass(bool on) noexcept { bypassed_ = on; }

  // --- Taking and filing (the hit path) -----------------------------------------------------
  // The newest recent block, taken out of the list, when it is of exactly `rounded` bytes; else
  // nullptr. The list must not be empty.
  [[nodiscard]] static Block* take_newest(RecentFrees& recent, std::size_t rounded) noexcept {
    Block* const newest = recent.blocks[recent.count - 1];
    if (newest->size != rounded) return nullptr;
    --recent.count;
    newest->recent = false;
    return newest;
  }
  // `block`, freed (its statistics uncounted), into `recent`, which has room.
  static void file(Block* block, RecentFrees& recent) noexcept {
    // inactive_split is counted when the block is merged into the bins, as if it had been
    // then; a block reused from here was never merged and never counted.
    block->requested_size = 0;
    block->recent = true;
    recent.blocks[recent.count++] = block;
  }
  // Room for one more in a full list: its oldest block, taken out (the caller merges it);
  // nullptr when the list has room.
  [[nodiscard]] static Block* make_room(RecentFrees& recent) noexcept;

  // --- Flushing ---------------------------------------------------------------------------
  // Every block of `recent`, in the order they were freed, out of the list and to merge().
  template <class Merge>
  static void flush(RecentFrees& recent, Merge&& merge) noexcept {
    for (std::size_t i = 0; i < recent.count; ++i) merge(recent.blocks[i]);
    recent.count = 0;
  }
  // Every stream's list in `store` flushed, unless no free was made since the last walk
  // (`frees`: AllocatorStatistics::frees()), when every list is empty: only frees fill them.
  // Whether it walked.
  template <class Merge>
  bool flush_all(const BlockStore& store, std::uint64_t frees, Merge&& merge) noexcept {
    if (frees == frees_at_flush_) return false;
    store.for_each_pools([&merge](StreamId, StreamPools& pools) { flush(pools.recent, merge); });
    frees_at_flush_ = frees;
    return true;
  }
  // Whether any stream's list in `store` holds a block.
  [[nodiscard]] static bool any(const BlockStore& store) noexcept;
  // Only those of `recent` that `bins` would hold, in the order they were freed; the others stay.
  template <class Merge>
  static void flush_into(RecentFrees& recent, const FreeBins& bins, Merge&& merge) noexcept {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < recent.count; ++i) {
      Block* b = recent.blocks[i];
      if (b->segment->bins == &bins) {
        merge(b);
      } else {
        recent.blocks[kept++] = b;
      }
    }
    recent.count = kept;
  }

  // --- The placement question ---------------------------------------------------------------
  // Whether `block`, front-cached, may serve the next allocation of its size where best fit
  // would put it. Asked at the free with expandable segments, and by allocate_slow() before a
  // hit with both kinds (the hot path cannot ask). Merged at free, then found by best fit, it
  // would go back to the same address when no free or recent block lies below it (the merge
  // would start lower) and either an active block or the segment's end follows it (merging
  // changes nothing, and best fit takes the lowest of equal blocks) or the pool's bins would
  // hold the merged block alone (a free block or unmapped space after it: best fit finds it,
  // tail or not). Refusing the rest keeps placement PyTorch's on the corpus: taking every such
  // block back made the 3-D cellular automaton reserve 1.2982 instead of 1.1579 of its live
  // peak.
  [[nodiscard]] static bool keeps_placement(const Block* block) noexcept;
  // The hit's case on the slow path (another stream than the last, after pending events
  // completed, or inside a peak window: every call of a replay): the newest block of `recent`
  // when it is of `rounded` bytes and only where best fit would pick it too, out of the list;
  // else nullptr. The others of its pool go to merge() first (an older one of this size is not
  // what best fit would find, and taking it once made the compiled GPT-2 step reserve 3.7% more
  // than PyTorch's rules from its second iteration on), then keeps_placement() asks what the
  // hit cannot: is a neighbour free now (front-cached beside it, or cached after it was filed),
  // or is a block of its size cached below it? If so it goes to merge() too, and best fit
  // decides. Random steps found both (tests/trace/random_steady_test.cpp: 7 of 3,000 one- and
  // two-stream steps reserved up to 2.9% more than PyTorch's rules, and 4 up to 18% more with
  // expandable segments). With placement by address space (`places_by_address`: above_peak,
  // always) the source's placement decides instead: keeps_placement() sees cached blocks, not
  // unmapped ones, so its answer depended on what was mapped, and 3 of 3,000 random steps
  // reserved more from their second iteration on.
  template <class Merge>
  [[nodiscard]] static Block* take_placed(RecentFrees& recent, std::size_t rounded,
                                          bool places_by_address, Merge&& merge) noexcept {
    if (recent.count == 0) return nullptr;
    Block* const block = take_newest(recent, rounded);
    if (block == nullptr) return nullptr;
    flush_into(recent, *block->segment->bins, merge);
    if (!places_by_address && keeps_placement(block)) return block;
    merge(block);
    return nullptr;
  }
  // At a slow free of `block` (allocated, with no stream event pending): whether it may enter
  // its stream's front cache rather than the bins. Its list's blocks of the same pool go to
  // merge() first, so that what decides sees them merged: kept there, an older block of this
  // size at a lower address, or a neighbour, was invisible to keeps_placement() (with
  // expandable segments, random steps called directly, without a replay's peak window,
  // reserved 1.18 of their live peak against PyTorch's expandable rules' 1.0017: the hit took
  // the newer of two freed blocks of one size). The other pool's stay: they are no neighbours,
  // and no fit for this block's size. Never while bypassed; with expandable segments
  // (`expandable`) only while no block waits for a stream (`blocks_wait`) and
  // keeps_placement(); in fixed segments as keeps_fixed_placement() says.
  template <class Merge>
  [[nodiscard]] bool admits(Block* block, bool expandable, bool blocks_wait,
                            Merge&& merge) const noexcept {
    flush_into(*block->segment->recent, *block->segment->bins, merge);
    return block->pending_events == 0 && !bypassed_ &&
           (!expandable || (!blocks_wait && keeps_placement(block))) &&
           keeps_fixed_placement(block);
  }
  // Fixed segments: whether a freed block marked kNextCached or kPrevCached may still enter the
  // front cache, that is whether best fit, merging it with its cached neighbours, would place
  // the next allocation of its size where a hit would (never with a cached previous
  // neighbour); clears the marks when the reasons are gone.
  [[nodiscard]] static bool keeps_fixed_placement(Block* block) noexcept;
  // `block` is about to be cached in `bins` (its segment's): in a fixed segment, marks the
  // blocks whose free must then ask keeps_fixed_placement(): the block before it and, when the
  // bins held one block, the block before that one (kNextCached), and the block after it
  // (kPrevCached). Expandable segments keep placement through their FrontCacheRoom instead.
  static void mark_neighbours(const Block* block, const FreeBins& bins) noexcept;
  // Into its segment's bins (a fixed segment's after the split or merge), marking the
  // neighbours whose frees must then ask (mark_neighbours).
  static void cache_in_bins(Block* block) noexcept {
    FreeBins& bins = *block->segment->bins;
    mark_neighbours(block, bins);
    bins.insert(block);
  }

  // The "recent" invariant: every stream's list in `store` lists at most its capacity, each
  // block of a segment filing into it, and the lists together hold exactly `recent` (the blocks
  // marked recent, BlockStore::check's LayoutSummary::recent; sorted here); none while
  // bypassed. Throws InternalError.
  void check(const BlockStore& store, std::vector<const Block*>& recent) const;
  // Its part for one stream's list: at most its capacity, each block of a segment filing into
  // it; appends them to `listed`.
  void check(const RecentFrees& recent, StreamId stream, std::vector<const Block*>& listed) const;
  // "front-cache": segment `s` has the room the hot free files by: its pool's bins keep the
  // growing expandable segment's (checked by check_rooms()), every other expandable segment's
  // is closed, every fixed one's the default (`pools`: its stream's, or null).
  static void check_room(const Segment& s, const StreamPools* pools);
  // "front-cache": each pool's bins keep its growing segment's room, exactly as they hold.
  static void check_rooms(StreamId stream, const StreamPools& pools);
  // Part of "block-state", fixed segments: a block beside a cached one is marked so that its
  // free asks keeps_fixed_placement() (kNextCached, kPrevCached).
  static void check_marks(const Block& b, const Block* before);

 private:
  bool bypassed_ = false;
  std::uint64_t frees_at_flush_ = 0;  // `frees` when flush_all() last walked
};

inline bool FrontCache::keeps_placement(const Block* block) noexcept {
  const Block* prev = block->prev;
  if (prev != nullptr && (prev->cached || prev->recent)) return false;
  const Block* next = block->next;
  if (next == nullptr) return true;
  if (next->recent) return false;
  // Free space after it: the bins must hold that alone (a cached block), or nothing.
  if (next->cached) return block->segment->bins->count() == 1;
  if (next->unmapped) return block->segment->bins->count() == 0;
  // Best fit takes the lowest address among equal sizes: not this block if the bins hold one
  // of its size below it.
  const Block* fit = block->segment->bins->best_fit(block->size);
  return fit == nullptr || fit->size != block->size || fit->address > block->address;
}

// The front cache's part of BlockStore::check()'s walk: check_room(), check_marks() and
// check_rooms() as it reaches each segment, block and stream.
class FrontCacheChecks final : public LayoutChecks {
 public:
  void segment(const Segment& s, const StreamPools* pools) override {
    FrontCache::check_room(s, pools);
  }
  void block(const Block& b, const Block* before) const override {
    FrontCache::check_marks(b, before);
  }
  void pools(StreamId stream, const StreamPools& pools,
             const std::unordered_set<const Segment*>& /*live*/) const override {
    FrontCache::check_rooms(stream, pools);
  }
};

}  // namespace memscope::detail

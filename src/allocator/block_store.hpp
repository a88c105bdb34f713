// BlockStore: the allocator core's bookkeeping of the memory it holds. Segments (each one
// reservation, tiled by its blocks), the blocks and the recyclers that keep spare ones, the
// pointer map of allocated and front-cached blocks, and each stream's pools (free bins of the
// small and large pool, its front cache's RecentFrees, its growing expandable segments); split
// and join of neighbouring blocks; the layout snapshot() shows. It calls no backend: the
// segment sources reserve and release the memory, and file or forget the segment here. A value
// member of AllocatorCore; the hit path reads last_pools() and live() inline. Not synchronised
// (the core's caller locks).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "allocator/block.hpp"
#include "allocator/free_bins.hpp"
#include "allocator/pointer_map.hpp"
#include "allocator/recycler.hpp"
#include "memscope/backend.hpp"
#include "memscope/snapshot.hpp"
#include "memscope/stats.hpp"

namespace memscope::detail {

// A stream's pools live while a segment of the stream does (segments point at their bins);
// empty_cache() drops the others, so a stream used once costs nothing once it is emptied.
struct StreamPools {
  StreamId stream{};
  FreeBins small{true};
  FreeBins large{false};
  RecentFrees recent;        // of both pools: a block's size says which
  std::size_t segments = 0;  // live segments of this stream (both pools)
  // expandable_segments: the stream's growable segment of each pool, once it has one.
  Segment* expandable_small = nullptr;
  Segment* expandable_large = nullptr;
};

// What BlockStore::check() found, for the other components' checkers.
struct LayoutSummary {
  std::vector<const Block*> all;      // every block of every segment, in the walk's order
  std::vector<const Block*> cached;   // the cached ones
  std::vector<const Block*> recent;   // the recent ones (front-cached)
  std::vector<const Block*> in_bins;  // what the free bins hold
  std::int64_t oversize_allocations = 0;
  std::int64_t oversize_segments = 0;
  Snapshot layout;  // layout(), in address order

  // The statistics the blocks say (the "statistics" invariant's reference): the layout's
  // totals, the same rebuild users compare with, with the oversize counts; recent blocks show
  // as inactive blocks but count in inactive_split only once merged. `split_every_remainder`:
  // expandable segments are on (Block::counts_as_split).
  [[nodiscard]] MemoryStats expected_statistics(bool split_every_remainder) const;
};

// What BlockStore::merge_free() made: the merged block, and the net change of inactive_split
// (count and bytes) for AllocatorStatistics::change_split.
struct Merged {
  Block* block = nullptr;
  std::int64_t split_blocks = 0;
  std::int64_t split_bytes = 0;
};

// The checks of a component that owns part of what a segment or block says (the front
// cache's rooms and marks: FrontCacheChecks; the expandable source's page map:
// ExpandableChecks), called by BlockStore::check() as its walk reaches each part, so every
// invariant is named where it is first seen. Each part does nothing unless overridden.
class LayoutChecks {
 public:
  // A segment, before its blocks (`pools`: its stream's, or null when missing).
  virtual void segment(const Segment& /*s*/, const StreamPools* /*pools*/) {}
  // An unmapped block (`before`: its previous neighbour).
  virtual void unmapped_block(const Block& /*b*/, const Block* /*before*/) {}
  // Any block, after its state was checked.
  virtual void block(const Block& /*b*/, const Block* /*before*/) const {}
  // After a segment's blocks (`mapped`: the bytes of its blocks that are not unmapped).
  virtual void segment_end(const Segment& /*s*/, std::size_t /*mapped*/) {}
  // A stream's pools, after their segment count was checked (`live`: every live segment).
  virtual void pools(StreamId /*stream*/, const StreamPools& /*pools*/,
                     const std::unordered_set<const Segment*>& /*live*/) const {}

 protected:
  LayoutChecks() = default;
  LayoutChecks(const LayoutChecks&) = default;
  LayoutChecks& operator=(const LayoutChecks&) = default;
  ~LayoutChecks() = default;
};

class BlockStore {
 public:
  // `lists_page_donors`: expandable segments, whose page recycling finds other streams' free
  // pages through the bins listed in page_donors().
  explicit BlockStore(bool lists_page_donors) noexcept : lists_page_donors_(lists_page_donors) {}
  BlockStore(const BlockStore&) = delete;
  BlockStore& operator=(const BlockStore&) = delete;
  // Deletes every block and segment left (the core has given their memory back).
  ~BlockStore();

  // --- Streams' pools ---------------------------------------------------------------------
  // The last used stream's pools: never null (no_pools(), whose front cache is always empty,
  // when none is), so the hit path need not test it.
  [[nodiscard]] StreamPools* last_pools() const noexcept { return last_pools_; }
  [[nodiscard]] const StreamPools* no_pools() const noexcept { return &no_pools_; }
  // The stream's pools, made on first use; they become last_pools(). May throw bad_alloc.
  [[nodiscard]] StreamPools& pools_for(StreamId stream) {
    if (last_pools_->stream == stream && last_pools_ != &no_pools_) [[likely]] {
      return *last_pools_;
    }
    return find_pools(stream);
  }
  // The stream's pools if it has them; null otherwise. Makes nothing.
  [[nodiscard]] StreamPools* pools_of(StreamId stream) const noexcept {
    const auto it = pools_.find(stream);
    return it == pools_.end() ? nullptr : it->second.get();
  }
  [[nodiscard]] std::size_t stream_count() const noexcept { return pools_.size(); }
  // Calls f(StreamId, StreamPools&) on every stream's pools.
  template <class F>
  void for_each_pools(F&& f) const {
    for (const auto& [stream, pools] : pools_) f(stream, *pools);
  }
  // Drops the pools of every stream without segments but last_pools() (a caller may hold it).
  void drop_unused_pools() noexcept;
  // The same for one stream's pools, found by its id: no walk over the others.
  void drop_pools_if_unused(StreamId stream) noexcept;
  // After an allocation on `stream` was refused nothing holds its pools: they go when it has no
  // segment, last_pools() too (release_all_cached() no longer walks every stream to drop them).
  void drop_refused_pools(StreamId stream) noexcept;
  // Expandable segments: the bins that hold a whole free page (PageDonors), of the small pools
  // and of the large ones: each pool has one page size, and a growth walks only the lists of
  // its own page size (expandable_segments_page_size may make the large pool's differ).
  [[nodiscard]] PageDonors& page_donors(bool small) noexcept { return page_donors_[small ? 0 : 1]; }
  [[nodiscard]] const PageDonors& page_donors(bool small) const noexcept {
    return page_donors_[small ? 0 : 1];
  }

  // --- Segments and blocks ----------------------------------------------------------------
  // Every live segment, newest first (Segment::next).
  [[nodiscard]] Segment* segments() const noexcept { return segments_; }
  // Makes the next `blocks` acquire_block() calls and `segments` add_segment() calls unable to
  // fail. May throw bad_alloc.
  void prepare(std::size_t blocks, std::size_t segments = 0) {
    block_recycler_.prepare(blocks);
    if (segments != 0) segment_recycler_.prepare(segments);
  }
  // Files a new segment at `base` under `pools`, covered by one fresh block (prepared).
  Segment* add_segment(StreamPools& pools, bool small, void* base, std::size_t size) noexcept;
  // Out of the segment list and its stream's count; the segment and its blocks are recycled.
  void forget_segment(Segment* segment) noexcept;
  [[nodiscard]] Block* acquire_block() noexcept { return block_recycler_.acquire(); }
  void recycle_block(Block* block) noexcept { block_recycler_.recycle(block); }
  // Spare blocks and segments beyond `keep` each go back to the system (empty_cache()).
  static constexpr std::size_t kSpares = 64;
  void trim_spares(std::size_t keep = kSpares) noexcept {
    block_recycler_.trim(keep);
    segment_recycler_.trim(keep);
  }
  // `high`, the neighbour just above `low` in their segment, becomes part of `low` and is
  // recycled; both are out of the bins (or both unmapped). Returns `low`.
  Block* join(Block* low, Block* high) noexcept;
  // Splits `b` at `at`, inside it: `b` keeps [b->address, at), and the block returned, new
  // (prepared) and linked after it, holds the rest; what either is (cached, unmapped) is the
  // caller's to set.
  [[nodiscard]] Block* split_at(Block* b, std::uintptr_t at) noexcept;
  // Inactive `block` (freed, front-cached or done waiting) joined with its cached neighbours,
  // which leave their bins: the merged block, no longer active (no requested size, no events
  // to wait for) and aged `clock`, for the caller to file in its bins (FrontCache::cache_in_bins),
  // with the net change of inactive_split (blocks that share their mapped range) the merge made.
  [[nodiscard]] Merged merge_free(Block* block, std::uint64_t clock) noexcept;

  // --- The pointer map: allocated and recent blocks (a recent one is not allocated) ---------
  [[nodiscard]] PointerMap& live() noexcept { return live_; }
  [[nodiscard]] const PointerMap& live() const noexcept { return live_; }
  // The allocated block at `ptr`, or null (null, not in the map, or a recent block).
  [[nodiscard]] Block* allocated_at(const void* ptr) const noexcept {
    if (ptr == nullptr) return nullptr;  // the pointer map's empty key: find() must never see it
    Block* block = live_.find(reinterpret_cast<std::uintptr_t>(ptr));
    return block != nullptr && block->use.allocated ? block : nullptr;
  }

  // The segments and blocks as plain values: an expandable segment shows as one segment per
  // contiguous mapped run of its blocks; in address order.
  [[nodiscard]] Snapshot layout() const;

  // The invariants the store owns (block_store_check.cpp), throwing InternalError naming the
  // broken one: "tiling" (segments linked both ways, not overlapping, each covered in address
  // order and without gaps by its blocks, whose links agree; blocks 512-byte aligned and
  // sized), "block-state" (each block exactly one of allocated, pending, recent, cached,
  // unmapped; only active ones carry a requested size, never above the size; no two cached
  // neighbours), "pointer-map" (exactly the allocated and recent blocks, each under its
  // address), "stream-pools" (each stream's pools filed under its id, counting its live
  // segments) and "free-bins" (each segment's bins its stream's pool of its kind, the bins
  // consistent and holding blocks of their own pool, the page donors). `checks` add the other
  // components' checks as the walk reaches each part, in their order. `max_split_size`: the
  // setting (oversize counts).
  [[nodiscard]] LayoutSummary check(std::initializer_list<LayoutChecks*> checks,
                                    std::size_t max_split_size) const;
  // After the front cache's lists were checked against summary.recent: the stand-in pools hold
  // nothing, last_pools() is live, and the bins hold exactly the cached blocks.
  void check_bins_hold_cached(LayoutSummary& summary) const;
  // Part of "free-bins": the PageDonors lists hold exactly the bins with a block that holds a
  // whole page, once each, and with expandable segments every pool's bins are listed for page
  // recycling.
  void check_page_donors() const;

 private:
  [[nodiscard]] StreamPools& find_pools(StreamId stream);

  bool lists_page_donors_;
  // Before pools_: the bins leave them when they go.
  std::array<PageDonors, 2> page_donors_;  // [small pool, large pool]
  // By stream. Only the core's allocate (through pools_for) and the segment sources reach
  // pools, and only drop_unused_pools() and drop_pools_if_unused() remove them: references to
  // a StreamPools are held within one allocate() call, and segments refer to theirs through
  // Segment::bins.
  std::unordered_map<StreamId, std::unique_ptr<StreamPools>> pools_;
  // Most streams are used many times in a row. Never null (see last_pools()).
  StreamPools* last_pools_ = &no_pools_;
  StreamPools no_pools_;
  PointerMap live_;
  Segment* segments_ = nullptr;
  Recycler<Block> block_recycler_;
  Recycler<Segment> segment_recycler_;
};

}  // namespace memscope::detail

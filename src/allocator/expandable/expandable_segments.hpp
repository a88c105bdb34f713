// ExpandableSegments: the segment source of expandable_segments:true (docs/design.md,
// "Expandable segments"). Each stream's pool grows one segment: an address range reserved from
// the backend, with pages mapped into it as needed (address ranges, the page map of each
// segment's unmapped blocks, growth); page recycling moves whole free pages of cached blocks,
// found through the BlockStore's PageDonors, instead of mapping new memory
// (expandable_segments.cpp); under above_peak and always a miss is placed by address space
// (placement.cpp). Not synchronised (the core's caller locks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <unordered_set>
#include <vector>

#include "allocator/allocator_statistics.hpp"
#include "allocator/block.hpp"
#include "allocator/block_store.hpp"
#include "allocator/segment_source.hpp"
#include "memscope/backend.hpp"
#include "memscope/config.hpp"

namespace memscope::detail {

class ExpandableSegments final : public SegmentSource {
 public:
  // `memory_limit` is the core's, read at each growth (set_memory_limit() may change it).
  // Throws ConfigError when expandable_segments is on and the backend cannot map pages, or
  // the page size is not a multiple of its granularity.
  ExpandableSegments(Backend& backend, const AllocatorConfig& config, BlockStore& store,
                     AllocatorStatistics& statistics, SourceHost& host,
                     const std::size_t& memory_limit, bool poison);

  // Placement by address space (recycling above_peak and always): best fit among the
  // runs of free address space (cached and unmapped blocks together), whatever is mapped,
  // the run at the end of the growing range last; maps what the run lacks. nullptr when no
  // run fits or the memory is not there (the caller falls back to the bins and grow()).
  [[nodiscard]] Block* place(StreamPools& pools, bool small, std::size_t rounded) override;
  // A cached block of at least `rounded` bytes at the lowest address of the pool's segment
  // where cached and unmapped space together fit it, taken out of the bins (recycling pages as
  // the policy says); nullptr when the memory (or the address range) is not there.
  [[nodiscard]] Block* grow(StreamPools& pools, bool small, std::size_t rounded) override;
  // Unmaps every whole free page, also inside partly used segments, and gives back the address
  // range of a segment with nothing mapped.
  std::size_t release_cached() override;
  // A large cached block with a whole page inside: its pages are unmapped.
  [[nodiscard]] bool collectable(const Block& b) const noexcept override {
    const Segment& s = *b.segment;
    return page_up(s, b.address) + s.page <= b.address + b.size;
  }
  std::size_t collect(Block* b) override { return unmap_free_pages(b); }
  void release_at_exit(const Segment& s) noexcept override;

  // empty_cache(): the above_peak policy's threshold starts again from what is mapped now.
  void restart_high_water() noexcept { mapped_high_water_ = mapped_; }
  // Free bins that page recycling has searched for pages (a growth must visit the donors only,
  // not every stream: tests/allocator/expandable_page_donors_test.cpp).
  [[nodiscard]] std::uint64_t bins_searched_for_pages() const noexcept {
    return bins_searched_for_pages_;
  }
  // The "mapping" invariant, checked as BlockStore::check() walks (expandable_check.cpp):
  // segment `s` is in whole pages; its unmapped blocks start and end on page boundaries, are
  // not neighbours (else "block-state") and are listed in address order, exactly (`listed`:
  // where the list is, advanced past `b`); the bytes mapped are what the blocks say; the
  // segment a stream's pool grows is one of its own live expandable segments.
  static void check_pages(const Segment& s);
  static void check_unmapped(const Block& b, const Block* before, const Block*& listed);
  static void check_mapped(const Segment& s, const Block* listed, std::size_t mapped);
  static void check_growing(StreamId stream, const StreamPools& pools,
                            const std::unordered_set<const Segment*>& live);

  // The expandable segment's first page boundary at or above (below) `address`.
  [[nodiscard]] static std::uintptr_t page_up(const Segment& s, std::uintptr_t address) {
    return s.base + (address - s.base + s.page - 1) / s.page * s.page;
  }
  [[nodiscard]] static std::uintptr_t page_down(const Segment& s, std::uintptr_t address) {
    return s.base + (address - s.base) / s.page * s.page;
  }

 private:
  // Unmaps the whole pages inside cached block `c` (those below `below` only); returns the
  // bytes unmapped.
  std::size_t unmap_free_pages(Block* c,
                               std::uintptr_t below = std::numeric_limits<std::uintptr_t>::max());
  void poison(std::uintptr_t address, std::size_t size, bool on = true) const noexcept;

  // grow() on a given run of `s`: from `start` to `last`, cached and unmapped blocks that
  // together hold `rounded` bytes.
  [[nodiscard]] Block* grow_run(Segment* s, Block* start, Block* last, std::size_t rounded);
  // Splits cached block `b`, out of its bins, so that its last `rounded` bytes are the block
  // returned (its front goes back to the bins): place_by_address()'s choice when the rest of the
  // run keeps more whole pages that way. store_ must be prepared for one block.
  [[nodiscard]] Block* split_off_back(Block* b, std::size_t rounded);
  // place_by_address()'s choice at the end of a free run of `run_bytes` from `start` (cached and
  // unmapped blocks): the last `rounded` bytes, mapped or moved in where unmapped; the run's
  // front stays free. nullptr when the memory is not there.
  [[nodiscard]] Block* place_at_back(Block* start, std::size_t run_bytes, std::size_t rounded);
  // Splits unmapped block `u` at page boundary `at` (inside it) and returns the upper part, also
  // unmapped, listed after `u`; join_unmapped() undoes it while neither part was mapped.
  // store_ must be prepared for one block.
  [[nodiscard]] Block* split_unmapped(Block* u, std::uintptr_t at) noexcept;
  void join_unmapped(Block* u, Block* upper) noexcept;
  [[nodiscard]] Segment* expandable_segment(StreamPools& pools, bool small, std::size_t at_least);
  // Makes `segment` (or none) the pool's growing segment, whose FrontCacheRoom its bins keep.
  static void set_growing(StreamPools& pools, bool small, Segment* segment) noexcept;
  // The lowest run of cached and unmapped blocks of `s` that fits `rounded` bytes: its first
  // and last block, or null when none does.
  static void lowest_run(const Segment& s, std::size_t rounded, Block*& start,
                         Block*& last) noexcept;
  // The pool's segment and lowest_run() in it, in a new range when the pool's is full; null
  // when no range has room.
  [[nodiscard]] Segment* run_to_grow(StreamPools& pools, bool small, std::size_t rounded,
                                     Block*& start, Block*& last);
  // Of the `to_map` bytes a growth maps, how many to take from other free pages instead, as
  // the recycling policy and the memory limit say: whole pages.
  [[nodiscard]] std::size_t bytes_to_recycle(std::size_t to_map, std::size_t page) const noexcept;
  // Bookkeeping of the first `bytes` (a page multiple) of unmapped block `u` being mapped (the
  // backend call is the caller's). Returns the cached block that holds them after merging with
  // cached neighbours.
  Block* map_front(Block* u, std::size_t bytes);
  // Bookkeeping of pages [address, address + bytes) inside cached block `c` that are unmapped
  // (or moved away): `c` is split around them. The backend call is the caller's.
  void unmapped_inside(Block* c, std::uintptr_t address, std::size_t bytes) noexcept;
  // Whole free pages [from, to) of a cached block that recycling may take (from the top, so
  // the block keeps its lower part and its pointer stays valid).
  struct FreePages {
    Block* block;
    std::uintptr_t from;
    std::uintptr_t to;
  };
  // Which streams' free pages a growth may take (grow_run() says which, from the policy).
  enum class Donors {
    // Any stream's, highest address first (at the limit, and always under `always`).
    every_stream,
    // Its own stream's, highest first; then, for what those do not cover, other streams'
    // (above_peak below the limit).
    own_stream_first,
  };
  // The free pages a miss growing segment `s` may take: every cached block of that page size
  // except those just before a block of `growing` (taking their top pages would merge into
  // it), and of the run's last block only what lies past `needed_end`. Other streams' pages
  // are found through the BlockStore's page_donors() (never by walking every stream); under
  // own_stream_first only until they cover `wanted` bytes with the stream's own, donor bins in the
  // list's order (most recently listed first), then highest address first among those.
  [[nodiscard]] std::vector<FreePages> recycling_sources(const Segment& s,
                                                         const std::vector<Block*>& growing,
                                                         const Block* last,
                                                         std::uintptr_t needed_end, Donors donors,
                                                         std::size_t wanted);
  // Appends to `out` the free pages of `bins` that recycling_sources() may take; their bytes.
  std::size_t gather_free_pages(const FreeBins& bins, const Segment& s,
                                const std::vector<Block*>& growing, const Block* last,
                                std::uintptr_t needed_end, std::vector<FreePages>& out);
  // Moves up to `bytes` (<= u->size) of the `sources`' pages to the front of unmapped block
  // `u`; returns the bytes moved and sets `merged` to the cached block that holds them.
  std::size_t recycle_into(Block* u, std::size_t bytes, std::vector<FreePages>& sources,
                           Block*& merged);
  void release_expandable_segment(Segment* segment) noexcept;
  // The ranges among `donors` that recycling left with no page mapped: their address ranges go
  // back, and the pools of their streams when left without segments (but last_pools(), the
  // caller's) go too; other streams' pools are not visited.
  void release_emptied_donors(const std::vector<Segment*>& donors) noexcept;
  void count_mapped(Segment* segment, std::int64_t bytes, std::int64_t ranges) noexcept;
  void count_split(const Block* b, int sign) noexcept;  // inactive_split of cached b
  void record_mapping(TraceAction action, std::uintptr_t address, std::size_t bytes,
                      StreamId stream) noexcept;

  Backend& backend_;
  const AllocatorConfig& config_;
  BlockStore& store_;
  AllocatorStatistics& statistics_;
  SourceHost& host_;
  const std::size_t& memory_limit_;
  bool poison_;
  // Pages of each pool, the bytes mapped in all segments, and their most since the last
  // empty_cache() (the above_peak recycling policy's threshold).
  std::size_t small_page_ = 0;
  std::size_t large_page_ = 0;
  std::size_t mapped_ = 0;
  std::size_t mapped_high_water_ = 0;
  std::uint64_t bins_searched_for_pages_ = 0;
};

// The expandable source's part of BlockStore::check()'s walk (the "mapping" invariant): the
// page checks of ExpandableSegments as it reaches each segment, unmapped block and stream,
// following the segment's unmapped list alongside. Fixed segments pass them all.
class ExpandableChecks final : public LayoutChecks {
 public:
  void segment(const Segment& s, const StreamPools* /*pools*/) override {
    ExpandableSegments::check_pages(s);
    listed_ = s.unmapped_first;
  }
  void unmapped_block(const Block& b, const Block* before) override {
    ExpandableSegments::check_unmapped(b, before, listed_);
  }
  void segment_end(const Segment& s, std::size_t mapped) override {
    ExpandableSegments::check_mapped(s, listed_, mapped);
  }
  void pools(StreamId stream, const StreamPools& pools,
             const std::unordered_set<const Segment*>& live) const override {
    ExpandableSegments::check_growing(stream, pools, live);
  }

 private:
  const Block* listed_ = nullptr;  // where the segment's unmapped list is, walked with it
};

}  // namespace memscope::detail

// Blocks and segments: the allocator's bookkeeping for memory it has reserved.
//
// A segment is one reservation from the backend. It is covered, in address order and without
// gaps, by a doubly linked list of blocks; a block is allocated, pending (freed but waiting for
// streams recorded with record_stream), recent (freed, held unmerged in its stream's
// RecentFrees for an allocation of the same size) or cached in a FreeBins list. Only cached
// neighbours are merged, and only inside one segment.
//
// An expandable segment (expandable_segments:true) is an address range reserved from the
// backend, with pages of memory mapped into it as it grows. Its blocks tile the whole range;
// a fourth state, unmapped, covers the parts with no memory behind them. Unmapped blocks start
// and end on page boundaries (counted from the range's base), are never in the free bins, are
// merged with unmapped neighbours, and are listed in address order from
// Segment::unmapped_first through their bin links. Every other block is wholly mapped.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "memscope/backend.hpp"

namespace memscope::detail {

// A block's or segment's address as the pointer the backend takes.
[[nodiscard]] inline void* as_pointer(std::uintptr_t address) noexcept {
  return reinterpret_cast<void*>(address);  // NOLINT(performance-no-int-to-ptr)
}

struct Block;
class FreeBins;

// The streams record_stream() named for a block besides its own. Most blocks have none, so a
// Block holds one pointer (8 bytes, not a vector's 24: with 400,000 blocks, 6 MiB less, and a
// Block fits malloc's 112-byte class) to a list made on first use and kept for reuse.
class StreamUses {
 public:
  [[nodiscard]] bool empty() const noexcept { return list_ == nullptr || list_->empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return list_ == nullptr ? 0 : list_->size(); }
  [[nodiscard]] const StreamId* begin() const noexcept {
    return list_ == nullptr ? nullptr : list_->data();
  }
  [[nodiscard]] const StreamId* end() const noexcept {
    return list_ == nullptr ? nullptr : list_->data() + list_->size();
  }
  void push_back(StreamId stream) {
    if (list_ == nullptr) list_ = std::make_unique<std::vector<StreamId>>();
    list_->push_back(stream);
  }
  void clear() noexcept {
    if (list_ != nullptr) list_->clear();
  }

 private:
  std::unique_ptr<std::vector<StreamId>> list_;
};

// The blocks a stream freed last, not yet merged into the free bins: the hot path's front
// cache. A program that frees a tensor and allocates one of the same size, the commonest pattern
// of a training step, gets the block back without the merge on free and the split on allocate
// that the bins would do (docs/design.md, "Hot path"). Newest last. Any allocation that finds
// no block of its exact size here, and every path that releases or inspects cached memory,
// first moves these blocks into the bins (AllocatorCore::flush_recent), so everything else sees
// the cache as if they had been merged when freed.
struct RecentFrees {
  static constexpr std::size_t kCapacity = 8;
  std::array<Block*, kCapacity> blocks{};
  std::size_t count = 0;
};

// When the free's hot path (AllocatorCore::file_if_hot) may file a block of a segment into its
// stream's RecentFrees: while their `count` is below `limit`, or while `count` is 0 and the
// block's next neighbour is the block at address `next`. Fixed segments keep the default: room
// up to kCapacity, and `next` names no block. An expandable segment's is kept by its pool's
// FreeBins while it is the pool's growing segment (FreeBins::keep_room): a limit of 1 while the
// bins are empty, else 0, and as `next` the bins' only block while they hold one. That is
// keeps_placement()'s commonest case (the free leaves the bins as they are or holding the
// merged block alone, so placement stays as it is) in the compare fixed segments make anyway,
// on the segment the hot path has loaded: with expandable segments a hit costs what it costs
// without. Other expandable segments keep it closed (kClosedRoom): their frees take the
// slow path, which tests keeps_placement() in full.
struct FrontCacheRoom {
  static constexpr std::uintptr_t kNoBlock = 1;  // no Block is at an odd address
  std::size_t limit = RecentFrees::kCapacity;
  std::uintptr_t next = kNoBlock;
};
inline constexpr FrontCacheRoom kClosedRoom{0, FrontCacheRoom::kNoBlock};

struct Segment {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  StreamId stream = kDefaultStream;
  bool small_pool = false;
  bool expandable = false;        // an expandable segment (the fields at the end)
  std::uint8_t stat_pool = 0;     // StatPool::small or ::large as an index (the hot path's)
  Block* first = nullptr;         // the block at `base`
  FreeBins* bins = nullptr;       // where its cached blocks go: its stream's small or large pool
  RecentFrees* recent = nullptr;  // where its blocks go when freed: its stream's front cache
  FrontCacheRoom room;            // when a free may go there on the hot path (see above)
  Segment* prev = nullptr;        // list of all segments, newest first
  Segment* next = nullptr;
  // Expandable segments only.
  std::size_t page = 0;             // the page its memory is mapped in
  std::size_t mapped_bytes = 0;     // memory behind it: what it adds to reserved bytes
  Block* unmapped_first = nullptr;  // its unmapped blocks, lowest address first

  void reset() noexcept { *this = Segment{}; }
};

struct Block {
  std::uintptr_t address = 0;
  std::size_t size = 0;
  std::size_t requested_size = 0;  // 0 unless active
  Segment* segment = nullptr;
  Block* prev = nullptr;  // neighbours inside the segment
  Block* next = nullptr;
  Block* bin_prev = nullptr;  // while cached: list links (small pool), tree children (large)
  Block* bin_next = nullptr;
  std::uint64_t cache_seq = 0;  // unique per caching: orders equal sizes, most recent first
  std::uint64_t cached_at = 0;  // allocator clock when cached; its age drives garbage collection
  std::uint32_t bin = 0;
  std::uint32_t pending_events = 0;  // stream events to wait for before it can be cached
  // Handed out, and why its free must take the slow path (slow_free, bits below): the free's
  // hot path tests the whole byte with one compare, and freeable_at_once() both fields with one.
  //   kOtherStreams: record_stream() named other streams than its own (stream_uses not empty).
  //   kNextCached (fixed segments): its next neighbour was cached while its pool's bins held
  //     another block too, so best fit, merging the two, might place the next allocation of its
  //     size elsewhere; the slow free decides whether it may enter the front cache
  //     (AllocatorCore::front_cache_keeps_placement). Set off the hot path, by
  //     FrontCache::cache_in_bins; may be stale true, never false while its next neighbour
  //     is cached beside another block (validate() checks).
  //   kPrevCached (fixed segments): its previous neighbour was cached, so best fit, merging the
  //     two, would split the merged block at the neighbour's lower address, not at this one's:
  //     the slow free sends it to the bins while that neighbour is still cached. Set by
  //     FrontCache::cache_in_bins; may be stale true, never false while its previous
  //     neighbour is cached (validate() checks).
  static constexpr std::uint8_t kOtherStreams = 1;
  static constexpr std::uint8_t kNextCached = 2;
  static constexpr std::uint8_t kPrevCached = 4;
  struct Use {
    bool allocated = false;
    std::uint8_t slow_free = 0;
  };
  Use use;
  bool cached = false;
  bool unmapped = false;  // expandable segments: no memory behind it (see above)
  bool recent = false;    // in its stream's RecentFrees (see above)
  // Cached in bins listed in a PageDonors, holding a whole page of its expandable segment:
  // counted in its bins' page_blocks() (set on insert, so its removal uncounts what was counted).
  bool holds_page = false;
  StreamUses stream_uses;  // streams other than its own recorded by record_stream

  // Back to a fresh block, keeping stream_uses' buffer for the next record_stream().
  void reset() noexcept {
    StreamUses uses = std::move(stream_uses);
    uses.clear();
    *this = Block{};
    stream_uses = std::move(uses);
  }

  [[nodiscard]] bool is_split() const noexcept { return prev != nullptr || next != nullptr; }
  // Whether it shares its (mapped) segment with other blocks: what the inactive_split statistic
  // counts. In a fixed segment that is is_split(); unmapped neighbours do not count.
  [[nodiscard]] bool shares_mapped_range() const noexcept {
    return (prev != nullptr && !prev->unmapped) || (next != nullptr && !next->unmapped);
  }
  // `expandable`: the allocator's setting (every segment is expandable or none), so the hot path
  // tests a flag it holds instead of loading the segment.
  [[nodiscard]] bool counts_as_split(bool expandable) const noexcept {
    return expandable ? shares_mapped_range() : is_split();
  }
  [[nodiscard]] StreamId stream() const noexcept { return segment->stream; }
  [[nodiscard]] bool small_pool() const noexcept { return segment->small_pool; }
  // Its pool's index in a StatArray, read, not computed (small_pool() needs 2 - small).
  [[nodiscard]] std::size_t stat_pool() const noexcept { return segment->stat_pool; }
  [[nodiscard]] bool active() const noexcept { return use.allocated || pending_events > 0; }
  // Allocated, and only its own stream used it: a free can file it at once.
  [[nodiscard]] bool freeable_at_once() const noexcept {
    return std::bit_cast<std::uint16_t>(use) == std::bit_cast<std::uint16_t>(Use{true, 0});
  }
  [[nodiscard]] bool other_streams() const noexcept { return (use.slow_free & kOtherStreams) != 0; }
  void mark_slow_free(std::uint8_t reason) noexcept { use.slow_free |= reason; }
  void unmark_slow_free(std::uint8_t reason) noexcept {
    use.slow_free &= static_cast<std::uint8_t>(~reason);
  }
};

}  // namespace memscope::detail

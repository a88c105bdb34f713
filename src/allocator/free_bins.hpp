// FreeBins: the cached blocks of one pool (small or large) of one stream, with best fit that
// does not slow down as the cache fills, and storage that grows with the blocks it holds.
//
// Best fit: the smallest cached block at least as big as the request, and among blocks of equal
// size the one at the lowest address, as PyTorch's rules take (the front cache, on the hot path,
// still hands back the newest block of its size). The most recent instead made the smallest
// device that fits cs336-medium ctx128 and ctx512 0.01-0.03 GB bigger than PyTorch's (a segment
// held a live block PyTorch's rules had left free to release).
//
// Two phases, one answer. Up to kLooseLimit blocks the bins are one list through the blocks'
// own links, most recently cached first, searched whole: no storage of their own, so a stream
// that caches a segment or two costs a few words (a fixed table cost each stream ~38 KiB, 3.8
// GiB for 100,000 streams). Past it they build an index: blocks grouped in size classes, each a
// SizeTreap ordered by (size, address), and a two-level bitmap marking the classes that hold
// blocks, so the first non-empty class at or above a size is found with two bit scans and the
// best fit is its leftmost block fitting, in O(log n) in the blocks of that class. The small pool
// has one exact class per 512-byte size up to its 2 MiB segment size; the large pool 16 classes
// per power of two. The index goes when the bins empty. Both phases choose the same block and
// visit blocks in the same order, so where the threshold falls never changes placement.
//
// Page recycling's index (expandable segments): bins listed in a PageDonors (list_in()) count
// their cached blocks that hold a whole page of their segment, and are in the list exactly
// while they hold one (see PageDonors).
//
// Nothing here throws: building the index is the only allocation, and if it fails the bins
// stay a list (slower, never wrong). Not synchronised; the allocator calls it under its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "allocator/block.hpp"
#include "allocator/size_rules.hpp"
#include "allocator/size_treap.hpp"

namespace memscope::detail {

class FreeBins;

// The free bins, of every stream and pool, that hold a cached block of an expandable segment
// with at least one whole page in it: where page recycling finds pages to move
// (AllocatorCore::grow_run). A growth that may take other streams' pages walks these bins
// only: with thousands of streams few hold a free page at a time, and walking every stream's
// bins at every growth made growth quadratic in the streams. The bins keep their own
// membership as blocks enter and leave them, which is off the hot path (the front cache is not
// in the bins). Not synchronised (the allocator's lock); it must outlive the bins listed in it.
struct PageDonors {
  FreeBins* first = nullptr;  // linked through FreeBins::next_donor()
  std::size_t count = 0;
};

class FreeBins {
 public:
  // More cached blocks than this and the bins build their index (see above). A search of the
  // list reads this many blocks at most; the index costs 32 KiB (small pool) or 5.6 KiB.
  static constexpr std::size_t kLooseLimit = 16;

  explicit FreeBins(bool small_pool);
  FreeBins(const FreeBins&) = delete;
  FreeBins& operator=(const FreeBins&) = delete;
  ~FreeBins() noexcept;  // leaves its PageDonors list

  void insert(Block* block) noexcept;
  void remove(Block* block) noexcept;
  // The best-fitting block for `size` bytes (the lowest address among the smallest that fit),
  // left in place, or nullptr.
  [[nodiscard]] Block* best_fit(std::size_t size) const noexcept;
  // What a miss takes from the bins for `rounded` bytes, out of them: best_fit(), when
  // it may serve the request (`split_limit`: blocks this big serve only their own size range,
  // see may_serve()), else nullptr. `spare_tails` (expandable segments): a tail, a free block
  // followed by unmapped space, is taken only when no other block fits.
  [[gnu::always_inline]] [[nodiscard]] Block* take_best_fit(std::size_t rounded,
                                                            std::size_t split_limit,
                                                            bool spare_tails) noexcept;

  [[nodiscard]] std::size_t count() const noexcept { return count_; }
  // From now on keeps `room` (the front-cache room of the pool's growing expandable segment:
  // see FrontCacheRoom) as these bins change, and sets it now; the room kept before is left
  // closed (kClosedRoom). Null keeps none. A kept room must stay valid until replaced.
  void keep_room(FrontCacheRoom* room) noexcept;
  // What keep_room() keeps in its room for these bins as they are.
  [[nodiscard]] FrontCacheRoom room_now() const noexcept;
  // The only cached block while count() is 1, else nullptr.
  [[nodiscard]] Block* only_block() const noexcept;
  [[nodiscard]] const FrontCacheRoom* kept_room() const noexcept { return room_; }
  // Whether the size-class index is built, and the bytes it holds (0 while the bins are a list).
  [[nodiscard]] bool indexed() const noexcept { return index_ != nullptr; }
  [[nodiscard]] std::size_t storage_bytes() const noexcept;

  // For AllocatorCore::validate(): appends every block the bins hold to `out` and returns the
  // first inconsistency of the bins themselves (a block not marked cached or in the wrong size
  // class, broken list links, classes out of order, bitmaps that disagree with the classes,
  // count() that disagrees with the blocks, page_blocks() or Block::holds_page that disagree
  // with the pages the blocks hold), or {} when there is none. (The PageDonors list is
  // AllocatorCore::validate()'s to check: it spans every stream's bins.)
  struct Problem {
    const char* what = nullptr;
    const Block* block = nullptr;
  };
  [[nodiscard]] Problem audit(std::vector<const Block*>& out) const;
  [[nodiscard]] bool small_pool() const noexcept { return small_pool_; }

  // From now on these bins are in `donors` while they hold a block with a whole page (set once,
  // while they are empty; the allocator does it for every pool when segments are expandable).
  void list_in(PageDonors* donors) noexcept { donors_ = donors; }
  // Their cached blocks with a whole page (Block::holds_page), while listed in a PageDonors.
  [[nodiscard]] std::size_t page_blocks() const noexcept { return page_blocks_; }
  [[nodiscard]] FreeBins* next_donor() const noexcept { return donor_next_; }
  [[nodiscard]] const PageDonors* donors() const noexcept { return donors_; }
  // Whether cached block `b` holds a whole page of its segment: an expandable one's, counted
  // from its base.
  [[nodiscard]] static bool holds_whole_page(const Block& b) noexcept;

  // Calls f(Block*) for every cached block of at least `min_size` bytes, in best-fit order
  // (smallest first, among equal sizes the lowest address first), whether indexed or not
  // (f must not modify the bins; collect first, then change).
  template <class F>
  void for_each(std::size_t min_size, F&& f) const {
    const auto visit = [&](Block* b) {
      if (b->size >= min_size) f(b);
    };
    if (!indexed()) {
      // At most kLooseLimit blocks (more only when building the index failed): picking each
      // next one by a pass over the list allocates nothing.
      const Block* last = nullptr;
      for (std::size_t i = 0; i < count_; ++i) {
        Block* next = nullptr;
        for (Block* b = loose_; b != nullptr; b = b->bin_next) {
          if ((last == nullptr || SizeTreap::before(last, b)) &&
              (next == nullptr || SizeTreap::before(b, next))) {
            next = b;
          }
        }
        if (next == nullptr) return;  // only with a broken list, which audit() reports
        visit(next);
        last = next;
      }
      return;
    }
    for (std::size_t bin = next_nonempty(bin_index(min_size)); bin < bins();
         bin = next_nonempty(bin + 1)) {
      index_->trees[bin].for_each(visit);
    }
  }

 private:
  // Out of line: only expandable segments call it, and the miss path stays small.
  [[gnu::noinline]] [[nodiscard]] Block* best_fit_sparing_tails(Block* tail, std::size_t rounded,
                                                                std::size_t split_limit) noexcept;
  [[nodiscard]] std::size_t bin_index(std::size_t size) const noexcept;
  // First bin >= `from` that holds a block, or bins() when none does.
  [[nodiscard]] std::size_t next_nonempty(std::size_t from) const noexcept;
  void mark(std::size_t bin, bool nonempty) noexcept;
  // Builds the index and moves the list into it, or leaves the bins a list when memory is short.
  void build_index() noexcept;
  [[nodiscard]] Block* loose_best_fit(std::size_t size) const noexcept;
  [[nodiscard]] Problem audit_list(std::vector<const Block*>& out) const;
  // A block enters or leaves the bins: page_blocks_ and the PageDonors list follow.
  void count_page_block(Block* block) noexcept;
  void uncount_page_block(Block* block) noexcept;
  void leave_donors() noexcept;  // out of donors_' list, page_blocks_ 0
  [[nodiscard]] Problem audit_blocks(std::vector<const Block*>& out) const;  // audit() but pages

  // The size-class index (see above), built past kLooseLimit blocks.
  struct Index {
    std::uint64_t summary = 0;               // bit per word of words: non-zero
    std::unique_ptr<std::uint64_t[]> words;  // bit per class: non-empty
    std::unique_ptr<SizeTreap[]> trees;      // one tree per size class
  };
  // Small-pool blocks are at most one 2 MiB segment: 4096 exact classes (64 bitmap words).
  static constexpr std::size_t kSmallBins = kSmallBuffer / kMinBlockSize;
  static constexpr unsigned kSubBinBits = 4;       // 16 classes per power of two
  static constexpr unsigned kFirstLargeLog2 = 20;  // 1 MiB
  static constexpr std::size_t kLargeBins = (64 - kFirstLargeLog2) << kSubBinBits;
  [[nodiscard]] std::size_t bins() const noexcept { return small_pool_ ? kSmallBins : kLargeBins; }
  [[nodiscard]] std::size_t word_count() const noexcept { return (bins() + 63) / 64; }

  bool small_pool_;
  // Beside small_pool_, in what would be padding: a block with a whole page is at least a page
  // (2 MiB or more), so 2^32 of them would be 8 PiB.
  std::uint32_t page_blocks_ = 0;
  std::size_t count_ = 0;
  std::uint64_t next_seq_ = 0;
  Block* loose_ = nullptr;          // unindexed: every block, most recently cached first
  FrontCacheRoom* room_ = nullptr;  // see keep_room(); null: none kept
  void update_room() noexcept {
    if (room_ != nullptr) *room_ = room_now();
  }
  std::unique_ptr<Index> index_;    // null while the bins are a list
  PageDonors* donors_ = nullptr;    // see list_in(); null: not listed
  FreeBins* donor_prev_ = nullptr;  // links in donors_ while page_blocks_ > 0
  FreeBins* donor_next_ = nullptr;
};

inline Block* FreeBins::take_best_fit(std::size_t rounded, std::size_t split_limit,
                                      bool spare_tails) noexcept {
  // Among equal sizes the lowest address (see above). The most recent also made expandable
  // segments (at_limit) reserve 1.0448 of the live peak on ctx128 in the steady state against
  // 1.0089 for PyTorch's expandable rules (now 1.0080).
  Block* block = best_fit(rounded);
  if (block == nullptr || !may_serve(block->size, rounded, split_limit)) return nullptr;
  // Expandable segments: a tail (a free block followed by unmapped space) is spared when
  // another block fits. The common hit, the pool's only free block, needs no search.
  if (spare_tails && block->next != nullptr && block->next->unmapped && count() > 1) [[unlikely]] {
    block = best_fit_sparing_tails(block, rounded, split_limit);
  }
  remove(block);
  return block;
}

}  // namespace memscope::detail

// FreeBins: the cached blocks of one pool (small or large) of one stream, with best fit that
// does not slow down as the cache fills.
//
// Blocks are grouped in size classes, and a two-level bitmap marks the classes that hold
// blocks, so the first non-empty class at or above a size is found with two bit scans. The
// small pool has one exact class per 512-byte size up to its 2 MiB segment size, each an
// intrusive list: its head is the answer, in O(1). The large pool has 16 classes per power of
// two, each a SizeTreap: O(log n) in the blocks of that class.
//
// Best fit: the smallest cached block at least as big as the request. Among blocks of equal
// size the most recently cached wins (LIFO): it is the likeliest to be warm in caches and TLBs,
// and it makes the choice O(1) in the small pool. (PyTorch breaks ties by lowest address.)
// Not synchronised; the allocator calls it under its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "allocator/block.hpp"
#include "allocator/size_treap.hpp"

namespace memscope::detail {

class FreeBins {
 public:
  explicit FreeBins(bool small_pool);

  // Allocates the size classes' storage, once: call it before the first insert() (an insert
  // into unprepared bins faults). Until then the bins cost a few words, so a stream that never
  // caches a block does not pay for 4096 small-pool lists. May throw std::bad_alloc.
  void prepare();
  [[nodiscard]] bool prepared() const noexcept { return own_words_ != nullptr; }

  void insert(Block* block) noexcept;
  void remove(Block* block) noexcept;
  // The best-fitting block for `size` bytes, left in place, or nullptr.
  [[nodiscard]] Block* best_fit(std::size_t size) const noexcept;

  [[nodiscard]] std::size_t count() const noexcept { return count_; }

  // For AllocatorCore::validate(): appends every block the bins hold to `out` and returns the
  // first inconsistency of the bins themselves (a block not marked cached or in the wrong size
  // class, broken list links, classes out of order, bitmaps that disagree with the classes,
  // count() that disagrees with the blocks), or {} when there is none.
  struct Problem {
    const char* what = nullptr;
    const Block* block = nullptr;
  };
  [[nodiscard]] Problem audit(std::vector<const Block*>& out) const;
  [[nodiscard]] bool small_pool() const noexcept { return small_pool_; }

  // Calls f(Block*) for every cached block of at least `min_size` bytes (f must not modify
  // the bins; collect first, then change).
  template <class F>
  void for_each(std::size_t min_size, F&& f) const {
    const auto visit = [&](Block* b) {
      if (b->size >= min_size) f(b);
    };
    for (std::size_t bin = next_nonempty(bin_index(min_size)); bin < bins_;
         bin = next_nonempty(bin + 1)) {
      if (small_pool_) {
        for (Block* b = lists_[bin]; b != nullptr; b = b->bin_next) visit(b);
      } else {
        trees_[bin].for_each(visit);
      }
    }
  }

 private:
  [[nodiscard]] std::size_t bin_index(std::size_t size) const noexcept;
  // First bin >= `from` that holds a block, or bins_ when none does.
  [[nodiscard]] std::size_t next_nonempty(std::size_t from) const noexcept;
  void mark(std::size_t bin, bool nonempty) noexcept;

  bool small_pool_;
  std::size_t bins_;
  std::size_t count_ = 0;
  std::uint64_t next_seq_ = 0;
  std::size_t word_count_;
  // Until prepare(), these point at shared, constant, all-empty storage that is only ever read
  // (insert() is the only writer, and it comes after prepare()); then at own_*.
  Block** lists_;              // small pool: one list per exact size, then an empty sentinel
  SizeTreap* trees_;           // large pool: one tree per size class
  std::uint64_t* words_;       // bit per bin: non-empty
  std::uint64_t summary_ = 0;  // bit per word of words_: non-zero
  std::unique_ptr<Block*[]> own_lists_;
  std::unique_ptr<SizeTreap[]> own_trees_;
  std::unique_ptr<std::uint64_t[]> own_words_;
};

}  // namespace memscope::detail
